#include <leap/candidate.h>
#include <cuda_runtime.h>
#include <math.h>

// Two launches: h = gelu(x W1^T + b1) into a scratch buffer, then y = h W2^T + b2.
__global__ void linear(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                       float* __restrict__ y, int64_t m, int64_t k, int64_t n, bool gelu) {
  const int64_t i = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
  const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  float s = b[j];
  for (int64_t q = 0; q < k; ++q) s += x[i * k + q] * w[j * k + q];
  const float v = s;
  y[i * n + j] = gelu ? 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)) : v;
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  const int64_t m = in[0].shape[0], d = in[0].shape[1], hdim = in[1].shape[0];
  cudaStream_t s = (cudaStream_t)stream;
  float* h = nullptr;
  if (cudaMalloc((void**)&h, sizeof(float) * (size_t)(m * hdim)) != cudaSuccess) return 2;
  linear<<<dim3((unsigned)((hdim + 15) / 16), (unsigned)((m + 15) / 16)), dim3(16, 16), 0, s>>>(
      LEAP_DATA(const float, &in[0]), LEAP_DATA(const float, &in[1]), LEAP_DATA(const float, &in[2]), h, m, d, hdim, true);
  linear<<<dim3((unsigned)((d + 15) / 16), (unsigned)((m + 15) / 16)), dim3(16, 16), 0, s>>>(
      h, LEAP_DATA(const float, &in[3]), LEAP_DATA(const float, &in[4]), LEAP_DATA(float, &out[0]), m, hdim, d, false);
  cudaFree(h);  // synchronises the device: the second launch has finished
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
