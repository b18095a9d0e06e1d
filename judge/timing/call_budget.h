// What one candidate's calls may cost, and the verdicts that follow from it: the call limit
// ([eval] call_limit_ratio x the reference, never under call_limit_floor_ms), too slow once most
// later calls ran over it, and the cut of a clearly slow candidate's correctness trials. A value
// type: it sees numbers the judge measured, never a runner.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "common/config.h"
#include "common/outcome.h"

namespace leap {

class CallBudget {
 public:
  // Trials before timing however slow the candidate (the first call loads).
  static constexpr uint32_t kLeastTrials = 2;
  // Trials are cut only for calls this long: shorter ones cost little, and a trial's cold caches
  // can make a call of tens of microseconds look twice as slow as the (warm) reference (relu on
  // the CPU).
  static constexpr double kTrialCutFloorUs = 1000;

  // `deadline_s`: the evaluation's deadline, the first call's budget.
  CallBudget(const EvalConfig& eval, double deadline_s);

  // Known once the reference is timed; until then no limit applies.
  void set_reference(double reference_us) { reference_us_ = reference_us; }

  // A call's limit: call_limit_ratio x the reference, never under the floor; 0: only the deadline.
  // A later call running ten times over it is stopped (the first call's budget is the deadline: it
  // loads modules, faults pages in, autotunes, builds what it caches). From the third call after the
  // first, the evaluation ends once most of those calls were over it: a slow candidate is over it on
  // every call, an honest one only where a call stalled while the driver created or tore down another
  // runner's context (seen on the H200: GEMM examples at 140-280 ms, 100x their reference); calls
  // made while one of the judge's spares was starting are not counted.
  double limit_ms() const;
  // How long call `index` (0-based) may run before it is stopped: 0 for the first (the deadline
  // alone), else 10 x the limit; 0 too when no limit applies.
  double stop_after_ms(size_t index) const { return index == 0 ? 0 : 10 * limit_ms(); }

  // "5.0 ms = max(100 x reference 26.6 us, floor 5.0 ms) ([eval] call_limit_ratio, call_limit_floor_ms)"
  std::string limit_text() const;

  // Call `index` (1.., not disturbed by a starting spare) took `own_us` of its own time: once most
  // of the calls after the first were over the limit (both of calls 2 and 3, or more than half of
  // more), the candidate is too slow. One stalled call is forgiven; two of two decide (a fourth call
  // could not make them fewer than most of three, so it would only add its time to the judge's).
  std::optional<Verdict> after_call(size_t index, double own_us);

  // Call `index` was stopped at its stop_after_ms(), or by the deadline after running past its
  // limit: the same verdict either way (which comes first depends on how loaded the machine is,
  // and a policy conditioned on the verdict must not see the load).
  Verdict stopped(size_t index) const;
  // Whether a call stopped by the deadline after `own_us` of its own time had run past its limit.
  bool over_limit(double own_us) const { return limit_ms() > 0 && own_us > 1000 * limit_ms(); }

  // After the kLeastTrials-th trial, whose own time (the judge's observation less its overhead) was
  // `own_us`: whether the rest of the trials are cut, for a candidate clearly slower than its
  // reference: at least [eval] slow_stop_ratio times it, and a millisecond (the rewards read no
  // finer). Its verified timed calls carry the rest of the correctness check.
  bool cut_trials(double own_us);
  bool trials_cut() const { return trials_cut_; }

 private:
  double ratio_, floor_ms_, slow_stop_ratio_, deadline_s_;
  double reference_us_ = 0;
  int later_calls_ = 0, slow_calls_ = 0;  // calls after the first (none disturbed), and those over the limit
  bool trials_cut_ = false;
};

}  // namespace leap
