#include <leap/candidate.h>
#include <cuda_runtime.h>
#include <math.h>

// One thread per output element.
__global__ void matmul(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                       int64_t m, int64_t k, int64_t n) {
  const int64_t i = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
  const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  a += blockIdx.z * m * k;
  b += blockIdx.z * k * n;
  c += blockIdx.z * m * n;
  if (i >= m || j >= n) return;
  float s = 0.0f;
  for (int64_t q = 0; q < k; ++q) s += a[i * k + q] * b[j * k + q];
  c[i * n + j] = s;
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  const int nd = in[0].ndim;
  const int64_t batch = 1;
  const int64_t m = in[0].shape[nd - 2], k = in[0].shape[nd - 1];
  const int64_t n = in[1].shape[nd - 2];
  const dim3 threads(16, 16);
  const dim3 blocks((unsigned)((n + 15) / 16), (unsigned)((m + 15) / 16), (unsigned)batch);
  matmul<<<blocks, threads, 0, (cudaStream_t)stream>>>(LEAP_DATA(const float, &in[0]), LEAP_DATA(const float, &in[1]),
                                                      LEAP_DATA(float, &out[0]), m, k, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
