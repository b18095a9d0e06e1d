#include <leap/candidate.h>
#include <cuda_runtime.h>
#include <math.h>

// Block-wide reduction through shared memory (blockDim.x = 256).
template <bool kMax>
__device__ float block_reduce(float v, float* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float o = scratch[threadIdx.x + s];
      scratch[threadIdx.x] = kMax ? fmaxf(scratch[threadIdx.x], o) : scratch[threadIdx.x] + o;
    }
    __syncthreads();
  }
  const float r = scratch[0];
  __syncthreads();
  return r;
}

__global__ void rows(const float* __restrict__ xs, float* __restrict__ ys, int64_t d, const float* __restrict__ res, const float* __restrict__ w) {
  __shared__ float scratch[256];
  const float* x = xs + blockIdx.x * d;
  float* y = ys + blockIdx.x * d;
  const float* r = res + blockIdx.x * d;
  float q = 0.0f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) { const float c = (x[j] + r[j]); q += c * c; }
  const float inv = rsqrtf(block_reduce<false>(q, scratch) / (float)d + 1e-6f);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = (x[j] + r[j]) * inv * w[j];
    y[j] = v;
  }
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  const int64_t rows_n = in[0].shape[0], d = in[0].shape[1];
  rows<<<(unsigned)rows_n, 256, 0, (cudaStream_t)stream>>>(LEAP_DATA(const float, &in[0]), LEAP_DATA(float, &out[0]), d, LEAP_DATA(const float, &in[1]), LEAP_DATA(const float, &in[2]));
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
