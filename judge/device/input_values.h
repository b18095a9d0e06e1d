// The judge's input streams: element i of an input depends on (seed, i) alone, and the CPU
// and the GPU compute the same values (bit for bit in float32 and narrower; float64 normal
// values agree within 1e-12), so an evaluation is reproducible from its recorded seed
// on either backend. Shared by the host filler (tensors.cpp) and the judge's kernels
// (judge_kernels.cu).
#pragma once
#include <cstdint>

#include <cmath>
#include <vector>

#if defined(__CUDACC__)
#define LEAP_HD __host__ __device__
#else
#define LEAP_HD
#endif

namespace leap::inputs {

enum class Kind : int { uniform = 0, normal = 1, positive = 2 };

constexpr int kQuantiles = 4097;

LEAP_HD inline uint64_t hash64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// a * b + c rounded twice, never fused: the host and the device must produce the same bits
// (nvcc contracts into an FMA by default; tensors.cpp is built with -ffp-contract=off).
LEAP_HD inline double mul_add(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(__dmul_rn(a, b), c);
#else
  return a * b + c;
#endif
}

// Element i of the stream whose base is hash64(seed), before narrowing to the element type.
// Normal values by inverse CDF: a quantile table with linear interpolation (tails cut at about
// +-3.9 sigma), ~1 ns per element on one CPU core where LibTorch's sampler takes ~8.
LEAP_HD inline double value_at(uint64_t base, int64_t i, Kind kind, double a, double b, const float* quantiles) {
  uint64_t h = hash64(base + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i + 1));
  if (kind == Kind::uniform) return mul_add(b - a, static_cast<double>(h >> 11) * 0x1.0p-53, a);
  uint32_t u = static_cast<uint32_t>(h >> 40);  // 24 bits: 12 index, 12 interpolation
  uint32_t k = u >> 12;
  // Exact in double (a 12-bit fraction times a difference of floats), so fused or not alike.
  double f = static_cast<double>(u & 4095u) * (1.0 / 4096.0);
  double lo = quantiles[k], hi = quantiles[k + 1];
  double z = lo + f * (hi - lo);
  double x = mul_add(z, b, a);
  return kind == Kind::positive ? (x < 0 ? -x : x) + 1e-3 : x;
}

inline const std::vector<float>& normal_quantiles() {
  static const std::vector<float> table = [] {
    std::vector<float> t(kQuantiles);
    for (int k = 0; k < kQuantiles; ++k) {
      double p = (k + 0.5) / (kQuantiles + 0.0), lo = -10, hi = 10;
      for (int it = 0; it < 80; ++it) {
        double mid = 0.5 * (lo + hi);
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
      }
      t[k] = static_cast<float>(0.5 * (lo + hi));
    }
    return t;
  }();
  return table;
}

}  // namespace leap::inputs
