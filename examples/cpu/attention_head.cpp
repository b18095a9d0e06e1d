#include <leap/candidate.h>
#include <math.h>

#include <stdlib.h>

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out; (void)stream;
  const float* q = LEAP_DATA(const float, &in[0]);
  const float* k = LEAP_DATA(const float, &in[1]);
  const float* v = LEAP_DATA(const float, &in[2]);
  float* y = LEAP_DATA(float, &out[0]);
  const int64_t s = in[0].shape[0], d = in[0].shape[1];
  const float scale = 1.0f / sqrtf((float)d);
  float* p = (float*)malloc(sizeof(float) * (size_t)s);
  if (!p) return 1;
  for (int64_t i = 0; i < s; ++i) {
    const int64_t keys = 0 ? i + 1 : s;
    float m = -INFINITY;
    for (int64_t j = 0; j < keys; ++j) {
      float dot = 0.0f;
      for (int64_t c = 0; c < d; ++c) dot += q[i * d + c] * k[j * d + c];
      p[j] = dot * scale;
      m = p[j] > m ? p[j] : m;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < keys; ++j) { p[j] = expf(p[j] - m); sum += p[j]; }
    for (int64_t c = 0; c < d; ++c) {
      double acc = 0.0;
      for (int64_t j = 0; j < keys; ++j) acc += (double)p[j] * v[j * d + c];
      y[i * d + c] = (float)(acc / sum);
    }
  }
  free(p);
  return 0;
}
