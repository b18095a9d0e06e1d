/* Host pass of a CUDA candidate whose device code NVRTC compiled (compile_farm/cuda_split).
 * Force-included by the compile farm; candidates never include it.
 *
 * Kernels live in the NVRTC image embedded in the library (leap_rtc_image). A launch
 * `k<<<grid, block, shared, stream>>>(args)` was rewritten to
 * `__leap_launch<decltype(k)>("k", grid, block, shared, stream)(args)`: the arguments convert
 * to the kernel's parameter types as with nvcc, and the launch goes through the CUDA runtime,
 * so cudaGetLastError() reports it as it would an nvcc launch. The farm precompiles this header
 * (with the C headers candidates usually include) so a host pass costs tens of ms. */
#ifndef LEAP_DETAIL_NVRTC_HOST_H
#define LEAP_DETAIL_NVRTC_HOST_H

#include <cuda_runtime_api.h>
#include <leap/candidate.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* Execution-space keywords mean nothing to the host compiler. */
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __shared__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)

/* The typed allocation overloads of cuda_runtime.h (the pass includes the lighter API header;
 * a load_inline extension's host pass may have the full one, through PyTorch's headers). */
#ifndef __CUDA_RUNTIME_H__
template <class T>
static inline cudaError_t cudaMalloc(T** p, size_t bytes) { return ::cudaMalloc(reinterpret_cast<void**>(p), bytes); }
template <class T>
static inline cudaError_t cudaMallocManaged(T** p, size_t bytes, unsigned flags = cudaMemAttachGlobal) {
  return ::cudaMallocManaged(reinterpret_cast<void**>(p), bytes, flags);
}
template <class T>
static inline cudaError_t cudaMallocAsync(T** p, size_t bytes, cudaStream_t s) {
  return ::cudaMallocAsync(reinterpret_cast<void**>(p), bytes, s);
}
template <class T>
static inline cudaError_t cudaMallocPitch(T** p, size_t* pitch, size_t width, size_t height) {
  return ::cudaMallocPitch(reinterpret_cast<void**>(p), pitch, width, height);
}
#endif

extern "C" const unsigned char leap_rtc_image[];

namespace leap_rtc {

struct State {
  cudaLibrary_t library = nullptr;
  const char* names[16] = {};
  cudaKernel_t kernels[16] = {};
  ~State() {
    if (library) cudaLibraryUnload(library);
  }
};
static State state;

// The kernel's runtime handle, from the image loaded on first use.
static inline cudaError_t kernel(const char* name, cudaKernel_t* out) {
  if (!state.library) {
    cudaError_t e = cudaLibraryLoadData(&state.library, leap_rtc_image, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (e != cudaSuccess) return e;
  }
  int slot = 0;
  for (; slot < 16 && state.names[slot]; ++slot)  // names are string literals: compare pointers
    if (state.names[slot] == name) {
      *out = state.kernels[slot];
      return cudaSuccess;
    }
  cudaError_t e = cudaLibraryGetKernel(out, state.library, name);
  if (e == cudaSuccess && slot < 16) {
    state.names[slot] = name;
    state.kernels[slot] = *out;
  }
  return e;
}

static inline cudaError_t launch(const char* name, dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                                 void** args) {
  cudaKernel_t k = nullptr;
  cudaError_t e = kernel(name, &k);
  if (e != cudaSuccess) return e;
  return cudaLaunchKernel(reinterpret_cast<const void*>(k), grid, block, args, shared, stream);
}

template <class F>
struct Launcher;
template <class... P>
struct Launcher<void(P...)> {
  const char* name;
  dim3 grid, block;
  size_t shared;
  cudaStream_t stream;
  cudaError_t operator()(P... args) const {
    void* argv[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
    return launch(name, grid, block, shared, stream, argv);
  }
};

}  // namespace leap_rtc

/* A kernel named outside a launch (cudaFuncSetAttribute, occupancy queries): its cudaKernel_t. */
static inline const void* __leap_kernel(const char* name) {
  cudaKernel_t k = nullptr;
  return leap_rtc::kernel(name, &k) == cudaSuccess ? reinterpret_cast<const void*>(k) : nullptr;
}

template <class F>
static inline leap_rtc::Launcher<F> __leap_launch(const char* name, dim3 grid, dim3 block, size_t shared = 0,
                                                  cudaStream_t stream = nullptr) {
  return {name, grid, block, shared, stream};
}

#endif
