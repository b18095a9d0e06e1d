// What the judge saw of a runner's calls against what the runner claimed: the overhead of a call
// (trusted no-op calls, first on the candidate's runner before it loads, then on spares beside the
// timed calls), each timed call's observation, report and wait for a CPU, the sample the timing
// keeps of it, and the escape check (work outside the evaluator's stream on the GPU, a forged
// timing on the CPU). A value type: it sees numbers the judge measured, never a runner.
#pragma once
#include <optional>
#include <vector>

#include "common/config.h"
#include "common/outcome.h"

namespace leap {

class Calibration {
 public:
  // A call's wait for a CPU up to this: a call that did not wait.
  static constexpr double kNoWaitUs = 10;

  Calibration(const EvalConfig& eval, bool gpu, bool python);

  // A trusted no-op call on the candidate's runner before it loads: what the judge observed beyond
  // the runner's report (`excess_us`), and of it the runner's wait for a CPU (GPU; 0 on the CPU).
  void add_before_load(double excess_us, double waited_us);
  // The same on a spare runner that never held a candidate, beside the timed calls.
  void add_live(double excess_us, double waited_us);
  // A timed call: the judge's observation (GPU: its wall clock; CPU: the kernel's account of the
  // runner's CPU time), the runner's report and its wait for a CPU. Returns the call's sample.
  // CPU: the observation less the overhead, not the runner's word. GPU: the runner's events (the
  // precise figure) no lower than what the judge's own clock allows for this call: a forged or
  // escaping call gains at most the allowance, whatever share of calls forge.
  double add_call(double observed_us, double reported_us, double waited_us);
  // The timed calls and live calibrations so far are dropped (the paired re-measurement replaces them).
  void restart();

  // The overhead of a call: the median of the calibrations before the load, and after check(), of
  // the live ones where there were 3 or more.
  double overhead_us() const { return overhead_us_; }
  // The timed calls' observations less the overhead (the CPU's samples, once the overhead is final).
  std::vector<double> samples_less_overhead() const;

  // How far the judge's observation of a call may exceed the runner's report before the report is
  // not believed: noise of the judge's own clock and wake-up.
  double allowed_excess_us(double reported_us) const;

  // The escape check over the timed calls: nullopt when the median call's excess is within the
  // allowance, else the verdict with its evidence. `median_excess_us`: that excess.
  std::optional<Verdict> check(double* median_excess_us);

  const std::vector<double>& observed() const { return observed_; }

 private:
  bool gpu_, python_;
  double slack_, slack_us_;
  std::vector<double> before_, before_net_;  // the calibrations before the load (their first call left out)
  double overhead_us_ = 0;                   // the judge's observation of a no-op call beyond the runner's report
  double net_overhead_us_ = 0;               // the same less the runner's wait for a CPU (the escape check's)
  std::vector<double> live_, live_net_;
  std::vector<double> observed_, reported_, waited_;  // per timed call
};

}  // namespace leap
