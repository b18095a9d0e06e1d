// y = OP(x) elementwise, x viewed as rows x d (d the last dimension).
LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out; (void)stream;
  const float* x = LEAP_DATA(const float, &in[0]);
  float* y = LEAP_DATA(float, &out[0]);
  const int64_t d = in[0].shape[in[0].ndim - 1], rows = leap_numel(&in[0]) / d;
  each(rows, d, [&](int64_t r, int64_t j, bool c) {
    const float v = x[r * d + j];
    y[r * d + j] = c ? LEAP_OP(v) : 0.0f;
  });
  return 0;
}
