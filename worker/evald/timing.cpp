#include "worker/evald/timing.h"

#include <algorithm>
#include <cmath>

#include "common/clock.h"

namespace leap {

TimingStats stats_of(std::vector<double> v) {
  TimingStats t;
  if (v.empty()) return t;
  t.samples = static_cast<uint32_t>(v.size());
  double sum = 0;
  for (double x : v) sum += x;
  t.total_us = sum;
  t.mean_us = sum / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - t.mean_us) * (x - t.mean_us);
  t.stddev_us = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0;
  t.rse = t.mean_us > 0 ? t.stddev_us / std::sqrt(static_cast<double>(v.size())) / t.mean_us : 0;
  std::sort(v.begin(), v.end());
  auto q = [&](double p) { return v[static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1)))]; };
  t.median_us = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  t.p10_us = q(0.1);
  t.p90_us = q(0.9);
  return t;
}

TimingRun time_calls(const std::function<int()>& call, const TimingSettings& s) {
  TimingRun run;
  auto w0 = Clock::now();
  for (unsigned i = 0; i < s.warmup_calls || micros_since(w0) < 1000 * s.warmup_ms; ++i)
    if ((run.error = call()) != 0) return run;
  auto t0 = Clock::now();
  if ((run.error = call()) != 0) return run;
  double one = micros_since(t0);
  unsigned batch = one >= s.min_sample_us ? 1 : static_cast<unsigned>(std::ceil(s.min_sample_us / std::max(one, 0.05)));
  batch = std::min(batch, 10000u);

  std::vector<double> samples;
  double mean = 0, m2 = 0;  // Welford
  auto start = Clock::now();
  for (;;) {
    auto t = Clock::now();
    for (unsigned b = 0; b < batch; ++b)
      if ((run.error = call()) != 0) return run;
    double x = micros_since(t) / batch;
    samples.push_back(x);
    double n = static_cast<double>(samples.size());
    double d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
    if (samples.size() >= s.max_samples) break;
    if (samples.size() >= s.min_samples) {
      double rse = std::sqrt(m2 / (n - 1)) / std::sqrt(n) / mean;
      if (rse <= s.rse_target) break;
      if (micros_since(start) / 1000.0 >= s.budget_ms) break;
    }
  }
  run.stats = stats_of(std::move(samples));
  return run;
}

}  // namespace leap
