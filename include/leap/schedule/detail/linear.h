// Matrix products: y = act(x @ W^T + b) (LEAP_WT: W stored [n, k] as nn.Linear) or
// y = A @ B (B stored [k, n]); LEAP_MLP chains two with GELU between.
// Row order walks the contiguous dimension innermost; column order walks it across rows.
static void product(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t k, int64_t n,
                    bool wt, int act) {
#if LEAP_ORDER_COLUMN
  // Strided: the innermost loop runs down the rows of x (and y).
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      float acc = 0.0f;
      span(k, [&](int64_t q, bool c) { if (c) acc += x[i * k + q] * (wt ? w[j * k + q] : w[q * n + j]); });
      y[i * n + j] = acc;
    }
#else
  for (int64_t i = 0; i < m; ++i) {
    if (wt) {
      for (int64_t j = 0; j < n; ++j) {
        float part[CHUNK] = {0};
        float acc = 0.0f;
        span(k, [&](int64_t q, bool c) {
          if (c) part[q % CHUNK] += x[i * k + q] * w[j * k + q];
        });
        for (int u = 0; u < CHUNK; ++u) acc += part[u];
        y[i * n + j] = acc;
      }
    } else {
      for (int64_t j = 0; j < n; ++j) y[i * n + j] = 0.0f;
      for (int64_t q = 0; q < k; ++q) {
        const float a = x[i * k + q];
        span(n, [&](int64_t j, bool c) { if (c) y[i * n + j] += a * w[q * n + j]; });
      }
    }
  }
#endif
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float v = y[i * n + j] + (b ? b[j] : 0.0f);
      if (act == 1) v = v > 0.0f ? v : 0.0f;
      if (act == 2) v = 0.5f * v * (1.0f + leap_erff(v * 0.70710678118654752f));
      y[i * n + j] = v;
    }
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out; (void)stream;
  const float* x = LEAP_DATA(const float, &in[0]);
  const float* w = LEAP_DATA(const float, &in[1]);
  float* y = LEAP_DATA(float, &out[0]);
  const int64_t m = in[0].shape[0], k = in[0].shape[1];
#if LEAP_MLP
  const int64_t h = in[1].shape[0], n = in[3].shape[0];
  float* hidden = (float*)malloc((size_t)(m * h) * sizeof(float));
  if (!hidden) return 1;
  product(x, w, LEAP_DATA(const float, &in[2]), hidden, m, k, h, true, 2);
  product(hidden, LEAP_DATA(const float, &in[3]), LEAP_DATA(const float, &in[4]), y, m, h, n, true, 0);
  free(hidden);
#else
  const int64_t n = LEAP_WT ? in[1].shape[0] : in[1].shape[1];
  product(x, w, LEAP_BIAS ? LEAP_DATA(const float, &in[2]) : nullptr, y, m, k, n, LEAP_WT, LEAP_ACT);
#endif
  return 0;
}
