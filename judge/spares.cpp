// The runner pool's spares: when they start (in batches, or during untimed work), and which one an
// evaluation takes.
#include "judge/runner_pool.h"

#include <algorithm>
#include <string>

#include "common/clock.h"

namespace leap {

void RunnerPool::top_up() {
  if (spares_.empty() || static_cast<int>(spares_.size()) < opts_.refill_below) replenish();
}

void RunnerPool::refill_during(double untimed_ms) {
  const int missing = opts_.spares - static_cast<int>(spares_.size());
  if (opts_.refill_below >= opts_.spares || missing <= 0) return;
  if (start_cost_ms() <= 0) return;
  // As many as fit: the driver makes contexts one after another, so a batch takes its size times one.
  start(std::min(missing, static_cast<int>(untimed_ms / start_cost_ms())));
}

bool RunnerPool::starting() {
  bool any = false;
  for (auto& r : spares_) {
    auto w = Runner::Wait::reply;
    any |= !is_ready(*r, Clock::now(), &w) && w == Runner::Wait::deadline;  // not one that died
  }
  return any;
}

bool RunnerPool::is_ready(Runner& r, Clock::time_point deadline, Runner::Wait* how) {
  if (r.ready) return true;
  if (!r.became_ready(deadline, how)) return false;
  // What one start costs (a start in a batch of n shares the driver with n - 1 others), the most
  // over the current and the previous window of a batch's size: the estimate follows the load.
  window_ms_[1] = std::max(window_ms_[1], r.made_us / 1000 / std::max(1, r.batch));
  if (++starts_seen_ % std::max(1, opts_.spares) == 0) {
    window_ms_[0] = window_ms_[1];
    window_ms_[1] = 0;
  }
  return true;
}

void RunnerPool::replenish() { start(std::max(1, opts_.spares) - static_cast<int>(spares_.size())); }

void RunnerPool::start(int n) {
  for (int i = 0; i < n; ++i) {
    spares_.push_back(spawn());
    spares_.back()->batch = n;
  }
}

std::unique_ptr<Runner> RunnerPool::take(std::string* why, double* waited_us) {
  *waited_us = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    // A spare that ended while it waited (its zygote killed, the machine's OOM killer) is not one
    // to hand out: its first call would fail for no fault of the candidate.
    for (size_t i = spares_.size(); i-- > 0;)  // from the back: a discard shifts only later ones
      if (spares_[i]->lost()) discard_spare(spares_[i].get());
    top_up();
    // The first spare that has finished starting; the oldest (started first) when none has.
    auto pick = spares_.begin();
    for (auto it = spares_.begin(); it != spares_.end(); ++it)
      if (is_ready(**it, Clock::now())) {
        pick = it;
        break;
      }
    auto r = std::move(*pick);
    spares_.erase(pick);
    if (!opts_.replace_after_use) top_up();  // replacements start while this one works
    if (r->ready) return r;
    auto t0 = Clock::now();
    Runner::Wait w;
    bool ok = r->became_ready(after_seconds(opts_.start_timeout_s), &w);  // taken: not a spare's start
    *waited_us += micros_since(t0);
    if (ok) return r;
    *why = std::string("the candidate runner failed to start (") +
           (w == Runner::Wait::deadline ? "no answer" : "exited") + "): " + r->stderr_tail();
    if (zygote_ && zygote_->gone()) *why += " (its zygote ended: " + zygote_->stderr_tail() + ")";
  }
  return nullptr;
}

int RunnerPool::prime() {
  replenish();
  settle(opts_.start_timeout_s);
  int ready = 0;
  for (const auto& r : spares_) ready += r->ready;
  return ready;
}

void RunnerPool::settle(double seconds) {
  auto deadline = after_seconds(seconds);
  for (auto& r : spares_) (void)is_ready(*r, deadline);
}

Runner* RunnerPool::idle_spare() {
  for (auto& r : spares_)
    if (is_ready(*r, Clock::now())) return r.get();
  return nullptr;
}

}  // namespace leap
