#include "judge/pool/runner_session.h"

#include <algorithm>
#include <cstdio>

namespace leap {

CandidateDeadline::CandidateDeadline(double budget_s, Clock::time_point now)
    : budget_s_(budget_s), at_(now + seconds(budget_s)), judge_since_(now) {}

void CandidateDeadline::start(Clock::time_point now) {
  at_ = now + seconds(budget_s_);
  judge_since_ = now;
}

Clock::time_point CandidateDeadline::next_request(Clock::time_point now) {
  const auto moved = std::min(now - judge_since_, seconds(kJudgeOwnS) - judge_own_);
  if (moved.count() > 0) at_ += moved, judge_own_ += moved;
  judge_since_ = now;
  return at_;
}

Verdict unanswered(Runner::Wait w, const std::string& when, double deadline_s, const std::string& how,
                   const std::string& tail) {
  if (w == Runner::Wait::deadline) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", deadline_s);
    return {Status::timeout, Check::none,
            std::string("the candidate's load and calls exceeded the evaluation's ") + seconds + " s deadline " + when +
                "; the candidate's runner was killed"};
  }
  if (w == Runner::Wait::malformed)
    return {Status::cheat_detected, Check::forged_reply, "the runner sent a malformed reply " + when};
  return {Status::runtime_error, Check::none,
          "the candidate's process ended " + when + (how.empty() ? "" : ", " + how) +
              (tail.empty() ? "" : "; its last output:\n" + tail)};
}

RunnerSession::RunnerSession(std::unique_ptr<Runner> runner, bool gpu, double deadline_s)
    : runner_(std::move(runner)), gpu_(gpu), deadline_(deadline_s, Clock::now()) {}

void RunnerSession::begin_candidate() {
  baseline_threads_ = runner_->threads();
  deadline_.start(Clock::now());
}

std::optional<Verdict> RunnerSession::threads_left() {
  const int now = runner_->threads();
  if (now <= baseline_threads_) return std::nullopt;
  runner_->settled = false;
  return Verdict{
      Status::cheat_detected, Check::threads_left_running,
      std::to_string(now - baseline_threads_) + " thread(s) the candidate started were running outside its calls"};
}

Verdict RunnerSession::failed(Runner::Wait w, const std::string& when) {
  if (w != Runner::Wait::eof) return unanswered(w, when, deadline_.budget_s(), "", "");
  std::string tail = runner_->stderr_tail();
  return unanswered(w, when, deadline_.budget_s(), runner_->how_it_ended(0.5), tail);
}

double RunnerSession::window_start(Runner& r) const {
  return gpu_ ? 0 : r.cpu_mark_us >= 0 ? r.cpu_mark_us : r.cpu_time_us();
}

double RunnerSession::observed_us(Runner& r, double wall_us, double window_start_us) const {
  if (gpu_) return wall_us;
  r.cpu_mark_us = r.cpu_time_us();
  return r.cpu_mark_us - window_start_us;
}

}  // namespace leap
