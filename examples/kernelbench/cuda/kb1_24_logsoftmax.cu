// KernelBench level 1, LogSoftmax over dim 1: one block per row of a (rows, n) tensor; block-wide reductions
// through shared memory, the row read three times.
#include <leap/candidate.h>
#include <cuda_runtime.h>
#include <math.h>

template <bool kMax>
__device__ float block_reduce(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) {
    float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? shared[threadIdx.x] : (kMax ? -INFINITY : 0.0f);
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) {
      float w = __shfl_xor_sync(0xffffffffu, v, o);
      v = kMax ? fmaxf(v, w) : v + w;
    }
  if (threadIdx.x == 0) shared[0] = v;
  __syncthreads();
  return shared[0];
}

__global__ void __launch_bounds__(1024) rows(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  __shared__ float shared[32];
  const float* xr = x + blockIdx.x * n;
  float* yr = y + blockIdx.x * n;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, xr[i]);
  m = block_reduce<true>(m, shared);
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += expf(xr[i] - m);
  const float lse = m + logf(block_reduce<false>(s, shared));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] - lse;
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  const int64_t n = in[0].shape[in[0].ndim - 1], r = leap_numel(&in[0]) / n;
  rows<<<(unsigned)r, 1024, 0, (cudaStream_t)stream>>>(LEAP_DATA(const float, &in[0]), LEAP_DATA(float, &out[0]), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
