// Floating-point exceptions are never observed here: comparisons and selects may then be
// if-converted and vectorised (GCC keeps them scalar under its default -ftrapping-math).
#pragma GCC optimize("no-trapping-math")
#include <leap/candidate.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// CHUNK elements are processed per step of the contiguous loop; the template keeps them in
// registers, so the product is bounded.
#define CHUNK (LEAP_VEC * LEAP_UNROLL)
static_assert(CHUNK <= 8, "vector * unroll exceeds the 8 lanes this template keeps in registers");

#if LEAP_VEC == 1
#define LEAP_LOOP __attribute__((optimize("no-tree-vectorize")))
#else
#define LEAP_LOOP
#endif

// exp and erf as straight-line float code (no libm calls, no branches) so that loops over them
// vectorise; relative error about 2e-7 (exp) and absolute 1.5e-7 (erf).
static inline float leap_expf(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  const float t = x * 1.44269504f;
  const float n = (float)(int)(t + (t >= 0.0f ? 0.5f : -0.5f));  // round to nearest
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int bits = ((int)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

static inline float leap_erff(float x) {  // Abramowitz and Stegun 7.1.26
  const float a = x < 0.0f ? -x : x;
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const float e = 1.0f - poly * leap_expf(-a * a);
  return x < 0.0f ? -e : e;
}

// f(j) for j in [0, d): full chunks, then the remainder as the tail choice says.
//   scalar: one element at a time; zero: zero-filled (wrong unless d % CHUNK == 0);
//   strided: steps of VEC / 8 (never terminates for VEC < 8 when a remainder exists).
template <class F>
static inline LEAP_LOOP void span(int64_t d, F&& f) {
  const int64_t main_end = d - d % CHUNK;
  for (int64_t j = 0; j < main_end; j += CHUNK) {
#pragma GCC unroll 8
    for (int u = 0; u < CHUNK; ++u) f(j + u, true);
  }
#if LEAP_TAIL == 0
  for (int64_t j = main_end; j < d; ++j) f(j, true);
#elif LEAP_TAIL == 1
  for (int64_t j = main_end; j < d; ++j) f(j, false);
#else
  for (int64_t j = main_end; j < d; j += LEAP_VEC / 8) f(j, true);
#endif
}

// f(r, j, compute) over a rows x d grid: row by row (contiguous), or column by column
// (rows in lockstep, strided).
template <class F>
static inline LEAP_LOOP void each(int64_t rows, int64_t d, F&& f) {
#if LEAP_ORDER_COLUMN
  span(d, [&](int64_t j, bool c) {
    for (int64_t r = 0; r < rows; ++r) f(r, j, c);
  });
#else
  for (int64_t r = 0; r < rows; ++r) span(d, [&](int64_t j, bool c) { f(r, j, c); });
#endif
}
