// Fused scaled softmax: one block per row, float4 loads, a single online pass for the
// running max and sum (merged across threads), then one write pass. LibTorch runs a scale
// kernel and a softmax kernel, reading the row three times.
#include <leap/candidate.h>
#include <cuda_runtime.h>
#include <math.h>

namespace {

__device__ void merge(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  s = (m == -INFINITY ? 0.0f : s * __expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mm));
  m = mm;
}

__global__ void __launch_bounds__(256) scale_softmax(const float4* __restrict__ x, float4* __restrict__ y, int d4,
                                                     float scale) {
  __shared__ float ms[8], ss[8];
  const float4* xr = x + (size_t)blockIdx.x * d4;
  float4* yr = y + (size_t)blockIdx.x * d4;
  float m = -INFINITY, s = 0.0f;
  for (int j = threadIdx.x; j < d4; j += blockDim.x) {
    const float4 v = xr[j];
    const float a[4] = {v.x * scale, v.y * scale, v.z * scale, v.w * scale};
    const float vm = fmaxf(fmaxf(a[0], a[1]), fmaxf(a[2], a[3]));
    float vs = __expf(a[0] - vm) + __expf(a[1] - vm) + __expf(a[2] - vm) + __expf(a[3] - vm);
    merge(m, s, vm, vs);
  }
  for (int o = 16; o > 0; o >>= 1) merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  if ((threadIdx.x & 31) == 0) {
    ms[threadIdx.x >> 5] = m;
    ss[threadIdx.x >> 5] = s;
  }
  __syncthreads();
  m = ms[0];
  s = ss[0];
  for (int w = 1; w < 8; ++w) merge(m, s, ms[w], ss[w]);
  const float inv = 1.0f / s;
  for (int j = threadIdx.x; j < d4; j += blockDim.x) {
    const float4 v = xr[j];
    yr[j] = make_float4(__expf(v.x * scale - m) * inv, __expf(v.y * scale - m) * inv, __expf(v.z * scale - m) * inv,
                        __expf(v.w * scale - m) * inv);
  }
}

}  // namespace

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  const int64_t rows = in[0].shape[0], d = in[0].shape[1];
  if (d % 4 != 0) return 4;  // float4 rows
  scale_softmax<<<(unsigned)rows, 256, 0, (cudaStream_t)stream>>>(
      reinterpret_cast<const float4*>(LEAP_DATA(const float, &in[0])), reinterpret_cast<float4*>(LEAP_DATA(float, &out[0])),
      (int)(d / 4), 0.125f);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
