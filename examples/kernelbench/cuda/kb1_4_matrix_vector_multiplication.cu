// KernelBench level 1, matrix-vector product C = A B, A (M, K), B (K, 1): one block per row,
// float4 loads, a warp-shuffle reduction.
#include <leap/candidate.h>
#include <cuda_runtime.h>

__global__ void __launch_bounds__(512) matvec(const float* __restrict__ A, const float* __restrict__ B,
                                              float* __restrict__ C, int64_t K) {
  __shared__ float part[16];
  const float* a = A + blockIdx.x * K;
  float s = 0.0f;
  if (K % 4 == 0) {
    const float4* a4 = (const float4*)a;
    const float4* b4 = (const float4*)B;
    for (int64_t i = threadIdx.x; i < K / 4; i += blockDim.x) {
      const float4 u = a4[i], v = b4[i];
      s += u.x * v.x + u.y * v.y + u.z * v.z + u.w * v.w;
    }
  } else {
    for (int64_t i = threadIdx.x; i < K; i += blockDim.x) s += a[i] * B[i];
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int w = 0; w < (int)blockDim.x / 32; ++w) t += part[w];
    C[blockIdx.x] = t;
  }
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  const int64_t M = in[0].shape[0], K = in[0].shape[1];
  matvec<<<(unsigned)M, 512, 0, (cudaStream_t)stream>>>(LEAP_DATA(const float, &in[0]), LEAP_DATA(const float, &in[1]),
                                                         LEAP_DATA(float, &out[0]), K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
