#include <leap/candidate.h>
#include <math.h>

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out; (void)stream;
  const float* x = LEAP_DATA(const float, &in[0]);
  const float* w = LEAP_DATA(const float, &in[1]);
  const float* b = LEAP_DATA(const float, &in[2]);
  float* y = LEAP_DATA(float, &out[0]);
  const int64_t m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[0];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = b[j];
      for (int64_t q = 0; q < k; ++q) s += x[i * k + q] * w[j * k + q];
      const float v = s;
      y[i * n + j] = v > 0.0f ? v : 0.0f;
    }
  return 0;
}
