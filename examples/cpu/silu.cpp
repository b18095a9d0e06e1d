#include <leap/candidate.h>
#include <math.h>

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out; (void)stream;
  const float* x = LEAP_DATA(const float, &in[0]);
  float* y = LEAP_DATA(float, &out[0]);
  const int64_t n = leap_numel(&in[0]);
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v / (1.0f + expf(-v));
  }
  return 0;
}
