// Adaptive timing of repeated calls: warm-up, then samples until the relative standard
// error of the median is below target, the time budget is spent or max samples are taken.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/outcome.h"

namespace leap {

// How a run of calls is clocked (the judge's choice; [eval], an EvalConfig, says how many and how
// long).
struct CallClock {
  double min_sample_us = 20;  // calls faster than this are timed in batches
  bool cpu_clock = false;     // time with the calling thread's CPU clock instead of the wall clock
};

// Reference timings measured by one judge process, by task and device model.
using ReferenceTimings = std::map<std::string, TimingStats>;

struct TimingRun {
  TimingStats stats;
  int error = 0;  // first non-zero return code of `call`, timing stops there
};

// Enough samples: the maximum, or at least the minimum and then the spread's target or the
// budget; once the timed calls alone (the samples' sum) have spent the budget, over_budget_samples
// suffice (a candidate that slow is not ranked differently by more samples of it), and so they do
// once the samples alone have spent precise_stop_ms with the spread's target already met.
// `reference_us` (0: unknown) and `need` (the task's least speedup, 0: none): with slow_stop_ratio,
// 5 samples suffice once they put the candidate that many times slower than its reference and
// below `need`, with two standard errors of margin and the median within 5 %.
bool timing_done(const std::vector<double>& samples, const EvalConfig& s, double elapsed_ms, double reference_us = 0,
                 double need = 0);

// Warm-up done after `calls` calls taking `elapsed_ms`: warmup_calls calls and warmup_ms at least,
// except that one call longer than warmup_ms is warm-up enough (it settled clocks and caches).
bool warmup_done(unsigned calls, double elapsed_ms, const EvalConfig& s);

// `call` returns 0 on success.
TimingRun time_calls(const std::function<int()>& call, const EvalConfig& s, CallClock clock = {});

// The escape check's per-call excess (observed - reported - overhead) over the calls whose runner
// waited for a CPU at most `no_wait_us`, where those are at least half the calls and 3; else over
// every call with its wait taken off (`as_observed` false), which credits waits that delayed nothing.
struct CallExcess {
  std::vector<double> values;
  size_t unwaited = 0;  // calls that did not wait
  bool as_observed = false;
};
CallExcess call_excess(const std::vector<double>& observed, const std::vector<double>& waited,
                       const std::vector<double>& reported, double overhead_us, double no_wait_us);

// The q-quantile (nearest rank) of samples, sorted or not; 0 for none.
double quantile_sorted(const std::vector<double>& sorted, double q);
double quantile(std::vector<double> samples, double q);

// A thread's scheduler account from a /proc/.../schedstat file (`path`), in microseconds: its time
// on a CPU and its time ready to run but waiting for one; -1 each where the file is missing.
struct SchedTimes {
  double on_cpu_us = -1, waiting_us = -1;
};
SchedTimes schedstat_times(const std::string& path);

// Summary statistics of samples in microseconds.
TimingStats stats_of(std::vector<double> samples_us);

}  // namespace leap
