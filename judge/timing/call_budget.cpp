#include "judge/timing/call_budget.h"

#include <algorithm>
#include <cstdio>

namespace leap {

CallBudget::CallBudget(const EvalConfig& eval, double deadline_s)
    : ratio_(eval.call_limit_ratio), floor_ms_(eval.call_limit_floor_ms), slow_stop_ratio_(eval.slow_stop_ratio),
      deadline_s_(deadline_s) {}

double CallBudget::limit_ms() const {
  if (ratio_ <= 0 || reference_us_ <= 0) return 0;
  return std::max(ratio_ * reference_us_ / 1000, floor_ms_);
}

std::string CallBudget::limit_text() const {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%.1f ms = max(%g x reference %.1f us, floor %.1f ms) ([eval] call_limit_ratio, call_limit_floor_ms)",
                limit_ms(), ratio_, reference_us_, floor_ms_);
  return buf;
}

std::optional<Verdict> CallBudget::after_call(size_t index, double own_us) {
  ++later_calls_;
  slow_calls_ += own_us > 1000 * limit_ms();
  if (later_calls_ < 2 || 2 * slow_calls_ <= later_calls_) return std::nullopt;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "call %zu took %.1f ms; %d of calls 2-%zu took longer than their limit of %s: "
                "stopped as too slow",
                index + 1, own_us / 1000, slow_calls_, index + 1, limit_text().c_str());
  return Verdict{Status::timeout, Check::too_slow, buf};
}

Verdict CallBudget::stopped(size_t index) const {
  char buf[320];
  if (index == 0)
    std::snprintf(buf, sizeof buf,
                  "call 1 did not end within the evaluation's %g s deadline (the first call's budget; later "
                  "calls' limit: %s): stopped as too slow",
                  deadline_s_, limit_text().c_str());
  else
    std::snprintf(buf, sizeof buf, "call %zu took longer than %.1f ms, 10 x its limit of %s: stopped as too slow",
                  index + 1, stop_after_ms(index), limit_text().c_str());
  return Verdict{Status::timeout, Check::too_slow, buf};
}

bool CallBudget::cut_trials(double own_us) {
  trials_cut_ = slow_stop_ratio_ > 0 && reference_us_ > 0 && own_us >= kTrialCutFloorUs &&
                own_us >= slow_stop_ratio_ * reference_us_;
  return trials_cut_;
}

}  // namespace leap
