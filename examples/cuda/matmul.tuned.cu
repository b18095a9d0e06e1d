// Tiled SGEMM: 128x128 block tiles, K-steps of 8 staged in shared memory, and an 8x8
// register tile per thread (256 threads). Sizes that are not multiples of the tiles fall
// back to a simple kernel.
#include <leap/candidate.h>
#include <cuda_runtime.h>

namespace {

constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;

__global__ void __launch_bounds__(256) sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B,
                                                   float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BK][BM];
  __shared__ float Bs[BK][BN];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int a_row = tid / 2, a_col = (tid % 2) * 4;   // one float4 of A per thread
  const int b_row = tid / 32, b_col = (tid % 32) * 4; // one float4 of B per thread
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    const float4 a = *reinterpret_cast<const float4*>(&A[(size_t)(row0 + a_row) * K + k0 + a_col]);
    As[a_col + 0][a_row] = a.x;
    As[a_col + 1][a_row] = a.y;
    As[a_col + 2][a_row] = a.z;
    As[a_col + 3][a_row] = a.w;
    *reinterpret_cast<float4*>(&Bs[b_row][b_col]) =
        *reinterpret_cast<const float4*>(&B[(size_t)(k0 + b_row) * N + col0 + b_col]);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a_frag[TM], b_frag[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a_frag[i] = As[kk][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b_frag[j] = Bs[kk][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a_frag[i] * b_frag[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    float* c = &C[(size_t)(row0 + ty * TM + i) * N + col0 + tx * TN];
    reinterpret_cast<float4*>(c)[0] = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    reinterpret_cast<float4*>(c)[1] = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}

__global__ void sgemm_simple(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M,
                             int N, int K) {
  const int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= M || j >= N) return;
  float s = 0.0f;
  for (int q = 0; q < K; ++q) s += A[(size_t)i * K + q] * B[(size_t)q * N + j];
  C[(size_t)i * N + j] = s;
}

}  // namespace

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  const int M = (int)in[0].shape[0], K = (int)in[0].shape[1], N = (int)in[1].shape[1];
  const float* A = LEAP_DATA(const float, &in[0]);
  const float* B = LEAP_DATA(const float, &in[1]);
  float* C = LEAP_DATA(float, &out[0]);
  cudaStream_t s = (cudaStream_t)stream;
  if (M % BM == 0 && N % BN == 0 && K % BK == 0)
    sgemm_tiled<<<dim3(N / BN, M / BM), 256, 0, s>>>(A, B, C, M, N, K);
  else
    sgemm_simple<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, s>>>(A, B, C, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
