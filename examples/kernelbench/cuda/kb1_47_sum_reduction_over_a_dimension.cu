// KernelBench level 1, sum over dim 1 (keepdim) of a (B, D1, D2) tensor: one thread per output element, reading
// down D1 with neighbouring threads on neighbouring columns (coalesced).
#include <leap/candidate.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void reduce_dim1(const float* __restrict__ x, float* __restrict__ y, int64_t B, int64_t D1, int64_t D2) {
  const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, b = blockIdx.y;
  if (j >= D2) return;
  const float* p = x + b * D1 * D2 + j;
  float acc = 0.0f;
  for (int64_t k = 0; k < D1; ++k) {
    const float v = p[k * D2];
    acc = acc + v;
  }
  y[b * D2 + j] = acc;
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  const int64_t B = in[0].shape[0], D1 = in[0].shape[1], D2 = in[0].shape[2];
  dim3 grid((unsigned)((D2 + 255) / 256), (unsigned)B);
  reduce_dim1<<<grid, 256, 0, (cudaStream_t)stream>>>(LEAP_DATA(const float, &in[0]), LEAP_DATA(float, &out[0]), B, D1, D2);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
