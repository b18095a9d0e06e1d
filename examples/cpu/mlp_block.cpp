#include <leap/candidate.h>
#include <math.h>

// h = gelu(x W1^T + b1) is kept in a per-call buffer: no state survives the call.
#include <stdlib.h>

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out; (void)stream;
  const float* x = LEAP_DATA(const float, &in[0]);
  const float* w1 = LEAP_DATA(const float, &in[1]);
  const float* b1 = LEAP_DATA(const float, &in[2]);
  const float* w2 = LEAP_DATA(const float, &in[3]);
  const float* b2 = LEAP_DATA(const float, &in[4]);
  float* y = LEAP_DATA(float, &out[0]);
  const int64_t m = in[0].shape[0], d = in[0].shape[1], hdim = in[1].shape[0];
  float* h = (float*)malloc(sizeof(float) * (size_t)(m * hdim));
  if (!h) return 1;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < hdim; ++j) {
      float s = b1[j];
      for (int64_t q = 0; q < d; ++q) s += x[i * d + q] * w1[j * d + q];
      h[i * hdim + j] = 0.5f * s * (1.0f + erff(s * 0.70710678118654752f));
    }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < d; ++j) {
      float s = b2[j];
      for (int64_t q = 0; q < hdim; ++q) s += h[i * hdim + q] * w2[j * hdim + q];
      y[i * d + j] = s;
    }
  free(h);
  return 0;
}
