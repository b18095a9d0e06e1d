// A per-row normalisation: softmax family (max, sum of exponentials) or norm family
// (mean and variance, or mean square), then an elementwise epilogue. With LEAP_DIM0 the groups
// are the columns (softmax over dim 0, batch norm): group r's element j is x[j * rows + r], so
// the column order is the contiguous one.
LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out; (void)stream;
  const float* x = LEAP_DATA(const float, &in[0]);
  float* y = LEAP_DATA(float, &out[0]);
#if LEAP_DIM0
  const int64_t rows = in[0].shape[1], d = in[0].shape[0];
#define AT(r, j) ((j) * rows + (r))
#define PARAM_AT(r, j) (r)
#else
  const int64_t rows = in[0].shape[0], d = in[0].shape[1];
#define AT(r, j) ((r) * d + (j))
#define PARAM_AT(r, j) (j)
#endif
  double* a = (double*)calloc((size_t)rows, sizeof(double));  // max, or mean
  double* s = (double*)calloc((size_t)rows, sizeof(double));  // sum of exp, or variance
  if (!a || !s) { free(a); free(s); return 1; }
#if LEAP_SOFTMAX
  for (int64_t r = 0; r < rows; ++r) a[r] = -INFINITY;
  each(rows, d, [&](int64_t r, int64_t j, bool c) { if (c) a[r] = fmax(a[r], LEAP_PRE(x[AT(r, j)])); });
  each(rows, d, [&](int64_t r, int64_t j, bool c) {
    if (c) s[r] += leap_expf((float)(LEAP_PRE(x[AT(r, j)]) - a[r]));
  });
  each(rows, d, [&](int64_t r, int64_t j, bool c) {
    const float v = (float)(LEAP_PRE(x[AT(r, j)]) - a[r]);
#if LEAP_LOG
    y[AT(r, j)] = c ? v - (float)log(s[r]) : 0.0f;
#else
    y[AT(r, j)] = c ? leap_expf(v) * (float)(1.0 / s[r]) : 0.0f;
#endif
  });
#else
  const float* w = LEAP_DATA(const float, &in[1]);
#if LEAP_CENTER
  const float* b = LEAP_DATA(const float, &in[2]);
  each(rows, d, [&](int64_t r, int64_t j, bool c) { if (c) a[r] += x[AT(r, j)]; });
  for (int64_t r = 0; r < rows; ++r) a[r] /= (double)d;
#endif
  each(rows, d, [&](int64_t r, int64_t j, bool c) {
    const double v = x[AT(r, j)] - a[r];
    if (c) s[r] += v * v;
  });
  float* mean = (float*)malloc((size_t)rows * 2 * sizeof(float));
  if (!mean) { free(a); free(s); return 1; }
  float* inv = mean + rows;
  for (int64_t r = 0; r < rows; ++r) {
    mean[r] = (float)a[r];
    inv[r] = (float)(1.0 / sqrt(s[r] / (double)d + LEAP_EPS));
  }
  each(rows, d, [&](int64_t r, int64_t j, bool c) {
    float v = (x[AT(r, j)] - mean[r]) * inv[r] * w[PARAM_AT(r, j)];
#if LEAP_CENTER
    v += b[PARAM_AT(r, j)];
#endif
    y[AT(r, j)] = c ? LEAP_POST(v) : 0.0f;
  });
  free(mean);
#endif
  free(a);
  free(s);
  return 0;
}
