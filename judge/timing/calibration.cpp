#include "judge/timing/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "judge/timing/timing.h"

namespace leap {

Calibration::Calibration(const EvalConfig& eval, bool gpu, bool python)
    : gpu_(gpu), python_(python), slack_(eval.timing_slack), slack_us_(eval.timing_slack_us) {}

void Calibration::add_before_load(double excess_us, double waited_us) {
  before_.push_back(excess_us);
  before_net_.push_back(excess_us - waited_us);
  overhead_us_ = quantile(before_, 0.5);
  net_overhead_us_ = quantile(before_net_, 0.5);
}

void Calibration::add_live(double excess_us, double waited_us) {
  live_.push_back(excess_us);
  live_net_.push_back(excess_us - waited_us);
}

double Calibration::add_call(double observed_us, double reported_us, double waited_us) {
  observed_.push_back(observed_us);
  reported_.push_back(reported_us);
  waited_.push_back(gpu_ ? waited_us : 0);
  return gpu_ ? std::max(reported_us, observed_us - overhead_us_ - allowed_excess_us(reported_us))
              : std::max(observed_us - overhead_us_, 0.0);
}

void Calibration::restart() {
  observed_.clear();
  reported_.clear();
  waited_.clear();
  live_.clear();
  live_net_.clear();
}

std::vector<double> Calibration::samples_less_overhead() const {
  std::vector<double> out;
  for (double x : observed_) out.push_back(std::max(x - overhead_us_, 0.0));
  return out;
}

// A Python runner's wake-up for the next request costs its interpreter 20-90 us of CPU on the CI
// machine (measured in the runner: the blocking read's return, cold after the call's and the
// judge's memory traffic), which a calibration on an idle spare does not see.
double Calibration::allowed_excess_us(double reported_us) const {
  const double slack_us = slack_us_ > 0 ? slack_us_ : gpu_ ? 50 : python_ ? 120 : 20;
  // On the CPU the candidate's time is the kernel's account of its CPU time, never its report,
  // so a false report gains nothing there: only a report under half of what the kernel counted
  // is called forged, where another process's load inflated an honest call's CPU time by 25-38 %
  // (relu, 97 us a call, beside a Python runner's start on the 2-core CI machine).
  const double fraction = gpu_ ? slack_ : std::max(slack_, 1.0);
  return std::max(fraction * reported_us, slack_us);
}

// The runner's own timing is the candidate's to forge; what the judge observed of the same call
// bounds it: observed = overhead + the call (the overhead measured beside the timed calls on a
// spare runner, under the same load), and on the GPU device-wide synchronisation puts work
// launched on other streams into the wall but not into the evaluator stream's events. On the GPU
// a runner spinning on the device's completion is preempted for whole scheduler slices on a
// machine whose cores are all busy (3.3 ms over 3.4 ms calls, seen on an H100 beside a busy loop
// per core): the machine's load, not work outside the stream. So the calls whose runner did not
// wait for a CPU (CpuWait, net of its own threads) are judged as observed; only where fewer than
// half of them are such calls is each call's wait taken off instead, which credits a wait that
// overlapped the kernel too (the GPU went on: 75.8 ms under 150 ms calls on that machine) and so
// lets more escape unnamed. Against the overhead with its calibrations' waits taken off. The
// timed samples keep their bound (the whole observation less the whole overhead), so a candidate
// gains no time from a wait either way.
std::optional<Verdict> Calibration::check(double* median_excess_us) {
  const bool live = live_.size() >= 3;  // else the overhead measured before the load
  if (live) overhead_us_ = quantile(live_, 0.5);
  const double net_overhead_us = live ? quantile(live_net_, 0.5) : net_overhead_us_;
  const CallExcess calls = call_excess(observed_, waited_, reported_, net_overhead_us, kNoWaitUs);
  const std::vector<double>& excess = calls.values;
  // The median call: an escape on most calls shows, a preempted judge on some does not (and a
  // call's sample is bounded by the judge's clock anyway).
  const double median = *median_excess_us = quantile(excess, 0.5);
  const double reported = quantile(reported_, 0.5);
  const double allowed = allowed_excess_us(reported);
  if (median <= allowed) return std::nullopt;
  // The spreads tell a shift on every call (work elsewhere) from a load that moved some calls;
  // the overhead's is that of the measurements the excess was reckoned against.
  const auto& over = live ? live_net_ : std::vector<double>{net_overhead_us};
  char waited[128] = "";
  if (gpu_ && calls.as_observed)
    std::snprintf(waited, sizeof waited, "; the %zu of %zu calls whose runner did not wait for a CPU", calls.unwaited,
                  observed_.size());
  else if (gpu_)
    std::snprintf(waited, sizeof waited, ", and the runner's wait for a CPU, median %.1f us, taken off",
                  quantile(waited_, 0.5));
  char buf[480];
  std::snprintf(buf, sizeof buf,
                "the judge observed %.1f us per call more than the %.1f us the runner reported (overhead %.1f us "
                "measured on runners that never held a candidate%s; allowed %.1f us; over %zu calls the excess's "
                "10th-90th percentiles %.1f-%.1f us, the overhead's %.1f-%.1f us)",
                median, reported, net_overhead_us, waited, allowed, excess.size(), quantile(excess, 0.1),
                quantile(excess, 0.9), quantile(over, 0.1), quantile(over, 0.9));
  // Each call as measured, so that a verdict on an honest kernel (the judge's bug) can be read
  // back: the judge's observation over the runner's report, the runner's wait, the calibrations beside.
  std::string calls_seen = ". Per call, the judge's observation over the report and the wait for a CPU (us):";
  for (size_t i = 0; i < observed_.size() && i < 12; ++i)
    calls_seen += (i ? ", " : " ") + std::to_string(std::lround(observed_[i] - reported_[i])) + "/" +
                  std::to_string(std::lround(waited_[i]));
  calls_seen += "; the calibrations' overhead (us):";
  for (size_t i = 0; i < over.size() && i < 12; ++i)
    calls_seen += (i ? ", " : " ") + std::to_string(std::lround(over[i]));
  if (gpu_)
    return Verdict{Status::cheat_detected, Check::stream_escape,
                   std::string(buf) + ": work ran outside the evaluator's stream" + calls_seen};
  return Verdict{Status::cheat_detected, Check::timing_forged,
                 std::string(buf) + ": the timing was forged" + calls_seen};
}

}  // namespace leap
