// One candidate's runner as the judge converses with it: the runner, the sequence numbers of the
// judge's requests, the candidate's deadline (moved later by the judge's own work between its
// requests), the runner's threads against their count before the load, the judge's windows on its
// CPU time, and how it ended. The judge's calls go through it; the verdicts stay the judge's.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/outcome.h"
#include "judge/pool/runner.h"

namespace leap {

// The deadline is the candidate's time: its load and its calls, as the wall clock saw them. The
// judge's own work between them (inputs, references, comparisons, calibrations) moves it later,
// so that a slow judge on a loaded machine never turns an honest candidate into a timeout (kb2_3's
// conv, 1.2 ms a call, timed out at a 4 s deadline on the 2-core CI machine beside a browser).
// At most kJudgeOwnS in all: the worker waits for a judge's answer the deadline plus 30 s, and
// the calibration's kPreparationS budget comes out of those too. Times are passed in (the judge
// passes Clock::now()).
class CandidateDeadline {
 public:
  static constexpr double kPreparationS = 20;  // leap's own calibration calls, before the load
  static constexpr double kJudgeOwnS = 8;      // how far the judge's own work may move the deadline

  CandidateDeadline(double budget_s, Clock::time_point now);
  // leap's own preparation (waiting for a runner, its calibration) is not the candidate's: it has
  // a budget of its own, and missing it is leap's failure.
  void prepare(Clock::time_point now) { at_ = now + seconds(kPreparationS); }
  // The candidate's budget starts now (its runner calibrated): a Python runner's start under load
  // took most of a 4 s deadline and turned honest answers into timeouts.
  void start(Clock::time_point now);
  // Before a request to the candidate: the deadline, later by the judge's own time since the last
  // request came back.
  Clock::time_point next_request(Clock::time_point now);
  // A request came back: the judge's own time counts from here.
  void judge_resumes(Clock::time_point now) { judge_since_ = now; }

  Clock::time_point at() const { return at_; }
  double budget_s() const { return budget_s_; }
  double judge_own_s() const { return std::chrono::duration<double>(judge_own_).count(); }

 private:
  static Clock::duration seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
  double budget_s_;
  Clock::time_point at_, judge_since_;
  Clock::duration judge_own_{};  // how far the judge's work has moved the deadline
};

// The verdict on a runner that did not answer (`w`) `when` ("during call 3"): the deadline
// (`deadline_s`), a malformed reply, or its end (`how` it ended, its last output `tail`).
Verdict unanswered(Runner::Wait w, const std::string& when, double deadline_s, const std::string& how,
                   const std::string& tail);

class RunnerSession {
 public:
  RunnerSession(std::unique_ptr<Runner> runner, bool gpu, double deadline_s);

  Runner& runner() { return *runner_; }
  std::unique_ptr<Runner> release() { return std::move(runner_); }
  CandidateDeadline& deadline() { return deadline_; }
  // Every request of the judge's, to this runner or to a spare calibrated beside it, a new number.
  uint64_t next_seq() { return ++seq_; }

  // The candidate's start: the runner's threads now are its baseline, and its deadline runs.
  void begin_candidate();
  // The candidate left no thread of its own running between calls; else the verdict (and the
  // runner is not settled: a thread may have launched work).
  std::optional<Verdict> threads_left();
  // The runner did not answer `when`.
  Verdict failed(Runner::Wait w, const std::string& when);

  // Where the judge's window on a call opens: on the CPU the runner's CPU time where the last one
  // closed (so no CPU time of the runner's falls between two windows); 0 on the GPU.
  double window_start(Runner& r) const;
  // What the judge itself saw of a call on `r`: on the GPU its wall clock (the runner synchronises
  // the whole device before answering); on the CPU the kernel's account of the runner's CPU time
  // since `window_start`, which the single-threaded candidate cannot forge and other load on the
  // machine does not inflate. Closes the window.
  double observed_us(Runner& r, double wall_us, double window_start_us) const;

 private:
  std::unique_ptr<Runner> runner_;
  bool gpu_;
  CandidateDeadline deadline_;
  uint64_t seq_ = 0;
  int baseline_threads_ = 0;
};

}  // namespace leap
