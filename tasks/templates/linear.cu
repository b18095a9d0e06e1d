// Matrix products, one thread per output: y = act(x @ W^T + b) (LEAP_WT: W stored [n, k]) or
// y = A @ B (B stored [k, n]); LEAP_MLP chains two with GELU between. Row order: consecutive
// threads on consecutive columns of y; column order: on consecutive rows (strided).
__global__ void product(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                        float* __restrict__ y, int64_t m, int64_t k, int64_t n, bool wt, int act) {
  const int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= m * n) return;
#if LEAP_ORDER_COLUMN
  const int64_t i = g % m, j = g / m;
#else
  const int64_t i = g / n, j = g % n;
#endif
  float part[CHUNK] = {0};
  span(k, 0, 1, [&](int64_t q, bool c) {
    if (c) part[q % CHUNK] += x[i * k + q] * (wt ? w[j * k + q] : w[q * n + j]);
  });
  float v = b ? b[j] : 0.0f;
#pragma unroll
  for (int u = 0; u < CHUNK; ++u) v += part[u];
  if (act == 1) v = v > 0.0f ? v : 0.0f;
  if (act == 2) v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  y[i * n + j] = v;
}

static void launch(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t k, int64_t n,
                   bool wt, int act, cudaStream_t s) {
  product<<<(unsigned)((m * n + THREADS - 1) / THREADS), THREADS, 0, s>>>(x, w, b, y, m, k, n, wt, act);
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  cudaStream_t s = (cudaStream_t)stream;
  const float* x = LEAP_DATA(const float, &in[0]);
  const float* w = LEAP_DATA(const float, &in[1]);
  float* y = LEAP_DATA(float, &out[0]);
  const int64_t m = in[0].shape[0], k = in[0].shape[1];
#if LEAP_MLP
  const int64_t h = in[1].shape[0], n = in[3].shape[0];
  float* hidden = nullptr;
  if (cudaMalloc(&hidden, (size_t)(m * h) * sizeof(float)) != cudaSuccess) return 1;
  launch(x, w, LEAP_DATA(const float, &in[2]), hidden, m, k, h, true, 2, s);
  launch(hidden, LEAP_DATA(const float, &in[3]), LEAP_DATA(const float, &in[4]), y, m, h, n, true, 0, s);
  const int rc = launch_status();
  cudaStreamSynchronize(s);
  cudaFree(hidden);
  return rc;
#else
  const int64_t n = LEAP_WT ? in[1].shape[0] : in[1].shape[1];
  launch(x, w, LEAP_BIAS ? LEAP_DATA(const float, &in[2]) : nullptr, y, m, k, n, LEAP_WT, LEAP_ACT, s);
  return launch_status();
#endif
}
