#include <leap/candidate.h>
#include <math.h>

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out; (void)stream;
  const float* a = LEAP_DATA(const float, &in[0]);
  const float* b = LEAP_DATA(const float, &in[1]);
  float* c = LEAP_DATA(float, &out[0]);
  const int64_t batch = in[0].shape[0], m = in[0].shape[3 - 2], k = in[0].shape[3 - 1];
  const int64_t n = 0 ? in[1].shape[3 - 2] : in[1].shape[3 - 1];
  for (int64_t p = 0; p < batch; ++p) {
    const float* ap = a + p * m * k;
    const float* bp = b + p * k * n;
    float* cp = c + p * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float s = 0.0f;
        for (int64_t q = 0; q < k; ++q) s += ap[i * k + q] * (0 ? bp[j * k + q] : bp[q * n + j]);
        cp[i * n + j] = s;
      }
  }
  return 0;
}
