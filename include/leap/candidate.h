/* leap candidate ABI.
 *
 * A candidate is one translation unit that exports exactly this entry point:
 *
 *   LEAP_ENTRY int leap_kernel(const DLTensor* inputs, int num_inputs,
 *                              DLTensor* outputs, int num_outputs, void* stream);
 *
 * inputs:  the task's inputs and parameters, in the order of task.toml, read-only.
 * outputs: preallocated, contiguous; every element must be written.
 * stream:  the evaluator's cudaStream_t on the CUDA backend, NULL on the CPU backend.
 * Returns 0 on success, any other value is reported as a runtime error.
 *
 * No LibTorch, no files, no processes, no sockets, no dynamic loading.
 * See docs/candidate-abi.md.
 */
#ifndef LEAP_CANDIDATE_H
#define LEAP_CANDIDATE_H

#include <dlpack/dlpack.h>
#include <stdint.h>

#define LEAP_ABI_VERSION 1

#ifdef __cplusplus
#define LEAP_ENTRY extern "C" __attribute__((visibility("default")))
#else
#define LEAP_ENTRY __attribute__((visibility("default")))
#endif

/* Helpers usable in host and device code (NVRTC accepts no host-only function). */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define LEAP_HOST_DEVICE __host__ __device__
#else
#define LEAP_HOST_DEVICE
#endif

/* Number of elements of a tensor. */
static inline LEAP_HOST_DEVICE int64_t leap_numel(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

/* Typed data pointer (tensors are contiguous, byte_offset honoured). */
#define LEAP_DATA(type, tensor) ((type*)((char*)(tensor)->data + (tensor)->byte_offset))

#endif /* LEAP_CANDIDATE_H */
