#include "judge/timing/timing.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <time.h>

#include "common/clock.h"

namespace leap {

double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  return sorted[static_cast<size_t>(std::lround(q * static_cast<double>(sorted.size() - 1)))];
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return quantile_sorted(v, q);
}

SchedTimes schedstat_times(const std::string& path) {
  std::ifstream f(path);
  unsigned long long on_cpu_ns = 0, waiting_ns = 0;
  if (!(f >> on_cpu_ns >> waiting_ns)) return {};
  return {static_cast<double>(on_cpu_ns) / 1e3, static_cast<double>(waiting_ns) / 1e3};
}

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
  std::sort(v.begin(), v.end());
  auto mid = [](const std::vector<double>& s) {
    return s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  };
  t.median_us = mid(v);
  // Relative standard error of the median, from the median absolute deviation: robust to the
  // rare preempted call that dominates the mean's standard error.
  std::vector<double> dev;
  for (double x : v) dev.push_back(std::abs(x - t.median_us));
  std::sort(dev.begin(), dev.end());
  double sigma = 1.4826 * mid(dev);
  t.rse = t.median_us > 0 && v.size() > 1 ? 1.2533 * sigma / std::sqrt(static_cast<double>(v.size())) / t.median_us : 0;
  t.p10_us = quantile_sorted(v, 0.1);
  t.p90_us = quantile_sorted(v, 0.9);
  return t;
}

bool timing_done(const std::vector<double>& samples, const EvalConfig& s, double elapsed_ms, double reference_us,
                 double need) {
  size_t n = samples.size();
  if (n >= s.max_samples) return true;
  constexpr size_t kSlowSamples = 5;  // fewer make the spread's estimate (median absolute deviation) unreliable
  if (s.slow_stop_ratio > 0 && reference_us > 0 && n >= kSlowSamples && n < s.min_samples) {
    const TimingStats st = stats_of(samples);
    const double fastest = st.median_us * (1 - 2 * st.rse);  // two standard errors faster than measured
    if (st.rse <= 0.05 && fastest >= s.slow_stop_ratio * reference_us && (need <= 0 || reference_us / fastest < need))
      return true;
  }
  // Below min_samples only (at or above it the budget test below decides the same, the wall time
  // covering the calls), so the sum is of a few samples, not of thousands per call.
  if (s.over_budget_samples > 0 && n < s.min_samples && n >= s.over_budget_samples) {
    double own_us = 0;  // the candidate's own time, not the judge's work between its calls
    for (double x : samples) own_us += x;
    if (own_us >= 1000 * s.timing_budget_ms) return true;
    if (s.precise_stop_ms > 0 && own_us >= 1000 * s.precise_stop_ms) return stats_of(samples).rse <= s.rse_target;
  }
  if (n < s.min_samples) return false;
  if (elapsed_ms >= s.timing_budget_ms) return true;
  // The spread is re-estimated every n/16 samples: cheap enough for thousands of samples.
  return n % std::max<size_t>(1, n / 16) == 0 && stats_of(samples).rse <= s.rse_target;
}

CallExcess call_excess(const std::vector<double>& observed, const std::vector<double>& waited,
                       const std::vector<double>& reported, double overhead_us, double no_wait_us) {
  CallExcess e;
  std::vector<double> unwaited;
  for (size_t i = 0; i < observed.size(); ++i) {
    e.values.push_back(observed[i] - waited[i] - reported[i] - overhead_us);
    if (waited[i] <= no_wait_us) unwaited.push_back(observed[i] - reported[i] - overhead_us);
  }
  e.unwaited = unwaited.size();
  e.as_observed = unwaited.size() >= std::max<size_t>(3, (observed.size() + 1) / 2);
  if (e.as_observed) e.values = std::move(unwaited);
  return e;
}

bool warmup_done(unsigned calls, double elapsed_ms, const EvalConfig& s) {
  if (calls == 0) return false;
  if (elapsed_ms < s.warmup_ms) return false;
  return calls >= s.warmup_calls || (s.warmup_ms > 0 && elapsed_ms / calls >= s.warmup_ms);
}

namespace {

double thread_cpu_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

}  // namespace

TimingRun time_calls(const std::function<int()>& call, const EvalConfig& s, CallClock clock) {
  TimingRun run;
  auto clock_us = [&] { return clock.cpu_clock ? thread_cpu_us() : micros_since(Clock::time_point{}); };
  auto w0 = Clock::now();
  for (unsigned i = 0; !warmup_done(i, micros_since(w0) / 1000.0, s); ++i)
    if ((run.error = call()) != 0) return run;
  double t0 = clock_us();
  if ((run.error = call()) != 0) return run;
  double one = clock_us() - t0;
  unsigned batch =
      one >= clock.min_sample_us ? 1 : static_cast<unsigned>(std::ceil(clock.min_sample_us / std::max(one, 0.05)));
  batch = std::min(batch, 10000u);

  std::vector<double> samples;
  auto start = Clock::now();
  for (;;) {
    double t = clock_us();
    for (unsigned b = 0; b < batch; ++b)
      if ((run.error = call()) != 0) return run;
    double x = (clock_us() - t) / batch;
    samples.push_back(x);
    if (timing_done(samples, s, micros_since(start) / 1000.0)) break;
  }
  run.stats = stats_of(std::move(samples));
  return run;
}

}  // namespace leap
