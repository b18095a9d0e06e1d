#include <leap/candidate.h>
#include <cuda_runtime.h>
#include <math.h>

// y = act(x W^T + b), one thread per output element.
__global__ void linear(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                       float* __restrict__ y, int64_t m, int64_t k, int64_t n) {
  const int64_t i = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
  const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  float s = b[j];
  for (int64_t q = 0; q < k; ++q) s += x[i * k + q] * w[j * k + q];
  const float v = s;
  y[i * n + j] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  const int64_t m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[0];
  const dim3 blocks((unsigned)((n + 15) / 16), (unsigned)((m + 15) / 16));
  linear<<<blocks, dim3(16, 16), 0, (cudaStream_t)stream>>>(LEAP_DATA(const float, &in[0]), LEAP_DATA(const float, &in[1]),
                                                           LEAP_DATA(const float, &in[2]), LEAP_DATA(float, &out[0]), m, k, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
