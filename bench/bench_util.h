// Small statistics shared by the benchmarks.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

namespace leap::bench {

// The first of a run's evaluations from which its accuracy stays at or above `target` through the
// last one; -1 when the last is below. A run that touches the target once and falls back (noisy
// accuracy over a few held-out tasks, or a lucky initial policy) has not reached it.
inline int first_held_at(const std::vector<double>& acc, double target) {
  int at = -1;
  for (size_t i = acc.size(); i-- > 0;) {
    if (acc[i] < target - 1e-9) break;
    at = static_cast<int>(i);
  }
  return at;
}

// The q-quantile (nearest rank) of v; 0 for an empty v.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

struct Dist {
  double p50 = 0, p90 = 0, max = 0, mean = 0, cv = 0;
};

inline Dist dist(std::vector<double> v) {
  Dist d;
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  double sum = 0, sq = 0;
  for (double x : v) sum += x, sq += x * x;
  d.p50 = quantile(v, 0.5);
  d.p90 = quantile(v, 0.9);
  d.max = v.back();
  d.mean = sum / static_cast<double>(v.size());
  double var = v.size() > 1 ? (sq - sum * d.mean) / static_cast<double>(v.size() - 1) : 0;
  d.cv = d.mean > 0 ? std::sqrt(std::max(0.0, var)) / d.mean : 0;
  return d;
}

}  // namespace leap::bench
