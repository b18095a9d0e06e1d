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

// One block per query row: scores in shared memory, softmax, then the weighted sum of v.
__global__ void attention(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                          float* __restrict__ y, int64_t s, int64_t d, float scale) {
  extern __shared__ float p[];  // s scores, then 256 floats of reduction scratch
  float* scratch = p + s;
  const int64_t i = blockIdx.x;
  const int64_t keys = i + 1;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    float dot = 0.0f;
    for (int64_t c = 0; c < d; ++c) dot += q[i * d + c] * k[j * d + c];
    p[j] = dot * scale;
    m = fmaxf(m, p[j]);
  }
  m = block_reduce<true>(m, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    p[j] = expf(p[j] - m);
    sum += p[j];
  }
  sum = block_reduce<false>(sum, scratch);
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = 0; j < keys; ++j) acc += p[j] * v[j * d + c];
    y[i * d + c] = acc / sum;
  }
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  const int64_t s = in[0].shape[0], d = in[0].shape[1];
  const size_t shared = sizeof(float) * (size_t)(s + 256);
  if (shared > 48 * 1024 && cudaFuncSetAttribute(attention, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared) != cudaSuccess)
    return 3;
  attention<<<(unsigned)s, 256, shared, (cudaStream_t)stream>>>(LEAP_DATA(const float, &in[0]), LEAP_DATA(const float, &in[1]),
                                                                LEAP_DATA(const float, &in[2]), LEAP_DATA(float, &out[0]), s, d,
                                                                1.0f / sqrtf((float)d));
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
