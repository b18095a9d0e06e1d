// KernelBench level 1, Frobenius normalisation x / ||x||_F: the sum of squares in double through
// per-block partial sums and one atomic add each, then a scaling pass.
#include <leap/candidate.h>
#include <cuda_runtime.h>

__device__ double g_sum;

__global__ void zero() { g_sum = 0.0; }

__global__ void sum_squares(const float* __restrict__ x, int64_t n) {
  __shared__ double part[32];
  double s = 0.0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    s += (double)x[i] * x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
    for (int w = 0; w < (int)blockDim.x / 32; ++w) t += part[w];
    atomicAdd(&g_sum, t);
  }
}

__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const float inv = (float)(1.0 / sqrt(g_sum));
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = x[i] * inv;
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  cudaStream_t s = (cudaStream_t)stream;
  const float* x = LEAP_DATA(const float, &in[0]);
  const int64_t n = leap_numel(&in[0]);
  zero<<<1, 1, 0, s>>>();
  sum_squares<<<132 * 8, 1024, 0, s>>>(x, n);
  scale<<<132 * 16, 256, 0, s>>>(x, LEAP_DATA(float, &out[0]), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
