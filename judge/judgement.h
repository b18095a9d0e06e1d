// One evaluation by the judge, phase by phase: setup, the runner and the candidate's loading, and
// the verdict in judgement.cpp; the candidate's calls, their limits and timing in
// judgement_calls.cpp. Only judge/evaluation.cpp makes one.
#pragma once
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/outcome.h"
#include "judge/checker.h"
#include "judge/evaluation.h"
#include "judge/timing.h"

namespace leap {

class Judgement {
 public:
  Judgement(proto::EvalRequest::Reader req, Device& dev, RunnerPool& pool, ReferenceTimings& cache,
            Workspace& workspace, GpuLock& lock, EvalOutcome& o);

  ~Judgement();

  void run();

 private:
  enum class Phase { trial, warmup, sample, extra };

  // Views of this task's tensors in the judge's workspace (grown if the task needs more), as
  // many slots and kept sets as fit beside the reference's and the candidate's own memory.
  void allocate();

  // The reference's time on this device: given, cached by this judge, or measured here before
  // any runner holds the candidate.
  void reference_timing();

  // On the CPU, no runner of this judge's is starting while something is timed (the pool starts
  // replacements after an evaluation; one still starting is waited for, briefly). On the GPU the
  // spares start in the driver's time, too slowly to wait for.
  void quiet();

  // A pre-started runner, and the judge's overhead measured on it with trusted no-op calls.
  bool start_runner();

  // One trusted no-op call: what the judge observes beyond what the runner reports, and of it the
  // runner's wait for a CPU (GPU; 0 on the CPU).
  bool calibrate(Runner& r, double* excess, double* waited, std::string* why = nullptr);

  // The overhead again, now, on a spare runner that never held a candidate and shares the
  // candidate runner's core: the machine's load at this moment, which the candidate cannot touch.
  void recalibrate(bool record = true);

  // The candidate's library checked for forbidden imports, then loaded in the runner.
  bool load();
  int python_manifest(std::vector<int>& extensions) const;
  double deadline_s() const;  // the candidate's budget from its load: [sandbox] deadline_s
  // The deadline for the candidate's next request: later by the judge's own time since the last.
  Clock::time_point candidate_deadline();

  // Correctness trials, the timed phase, extra checks of an implausible speedup, and the kept
  // timed calls verified once no candidate code runs.
  bool calls();

  // Warm-up and timed calls, the device the judge's alone (GpuLock): `samples` are the timings,
  // re-measured once when the first ones do not agree with what the judge observed.
  bool timed_phase(std::vector<double>& samples);

  // The second trial's own time (the judge's observation less its overhead) at least [eval]
  // slow_stop_ratio times the reference's, and a millisecond: the rewards read no finer.
  bool clearly_slow() const;

  // Timed calls into `samples`, then the last one verified in place (its inputs too). Until the
  // timing is precise enough, a spare calibrated after every other call; `paired`: a fixed
  // number of calls, each followed by a calibration.
  bool timed_calls(std::vector<double>& samples, bool paired);

  // One call: fresh inputs, poisoned outputs, the runner's reply, and the judge's checks.
  bool call(Phase phase, bool verify, double* elapsed_us);
  bool await_call(const runner::Command& c, size_t index, runner::Reply* r, double* wall, double* own_us,
                  double* waited_us);
  bool within_limit(size_t index, double own_us);
  bool reply_answers(const runner::Command& c, const runner::Reply& r);

  // A call's limit: call_limit_ratio x the reference, never under the floor; 0: only the deadline.
  // A later call running ten times over it is stopped (the first call's budget is the deadline: it
  // loads modules, faults pages in, autotunes, builds what it caches). From the third call after the first, the
  // evaluation ends once most of those calls were over it: a slow candidate is over it on every
  // call, an honest one only where a call stalled while the driver created or tore down another
  // runner's context (seen on the H200: GEMM examples at 140-280 ms, 100x their reference); calls
  // made while one of this judge's spares was starting are not counted.
  double call_limit_ms() const;

  // "5.0 ms = max(100 x reference 26.6 us, floor 5.0 ms) ([eval] call_limit_ratio, call_limit_floor_ms)"
  std::string limit_text() const;

  // A task may require a correct kernel to be fast (KernelBench's fast_p): judged on the
  // measured speedup, once the timing is done.
  bool fast_enough();

  // [eval] profile: an ok CUDA candidate's kernels measured after the verdict (judge/profiler.h).
  void profile();

  // What the judge itself saw of a call: on the GPU its wall clock (the runner synchronises the
  // whole device before answering); on the CPU the kernel's account of the runner's CPU time,
  // which the single-threaded candidate cannot forge and other load on the machine does not inflate.
  // On the CPU each call's window ends where the runner's next one starts (Runner::cpu_mark_us),
  // so no CPU time of a runner's falls between two of its windows.
  double observed_us(Runner& r, double wall_us, double cpu_before_us);
  double window_start(Runner& r) { return dev_.is_gpu() ? 0 : r.cpu_mark_us >= 0 ? r.cpu_mark_us : r.cpu_time_us(); }

  // Kills the runner; on the GPU, an arena its work may still reach is never handed to the next
  // evaluation (Workspace::quarantine).
  void retire_runner();

  // The candidate left no thread of its own running between calls.
  bool threads_unchanged();

  // How far the judge's observation of a call may exceed the runner's report before the report
  // is not believed: noise of the judge's own clock and wake-up.
  double allowed_excess_us(double reported_us) const;

  // The runner's own timing is the candidate's to forge; what the judge observed of the same call
  // bounds it: observed = overhead + the call (the overhead measured beside the timed calls on a
  // spare runner, under the same load), and on the GPU device-wide
  // synchronisation puts work launched on other streams into the wall but not into the evaluator
  // stream's events.
  bool timing_consistent(bool final);

  // The runner did not answer: the deadline, a malformed reply, or its end (and how it ended).
  bool runner_failed(Runner::Wait w, const std::string& when);

  // A judge-side failure once candidate code has run: the candidate's fault if the judge works
  // again as soon as the runner is gone (it held the device's memory, say), else leap's.
  void blame_after_failure(const std::exception& e);

  // Records the verdict; false, so that a phase can `return fail(...)`.
  bool fail(Status s, Check check, const std::string& feedback);

  proto::EvalRequest::Reader req_;
  proto::EvalSettings::Reader settings_;
  Device& dev_;
  RunnerPool& pool_;
  const bool python_;  // a KernelBench-format candidate (the Python runner)
  ReferenceTimings& cache_;
  Workspace& workspace_;
  GpuLock& lock_;
  EvalOutcome& o_;
  TimingSettings ts_;
  Checker checker_;
  Slots slots_;
  std::shared_ptr<Arena> arena_;
  std::unique_ptr<Runner> runner_;
  Clock::time_point deadline_;
  Clock::time_point judge_since_;  // the judge's own work since then does not spend the candidate's deadline
  Clock::duration judge_own_{};    // how far that work has moved the deadline
  std::mt19937_64 keep_rng_;
  uint64_t seq_ = 0;
  double overhead_us_ = 0;      // the judge's observation of a no-op call beyond the runner's report
  double net_overhead_us_ = 0;  // the same less the runner's wait for a CPU (the escape check's)
  int baseline_threads_ = 0;
  size_t last_slot_ = 0;
  bool trials_cut_ = false;  // a clearly slow candidate: its verified timed calls carry the rest of its trials
  int later_calls_ = 0, slow_calls_ = 0;  // calls after the first (none disturbed), and those over call_limit_ms()
  double last_wall_us_ = 0;
  double last_observed_us_ = 0;  // the last call as the judge observed it (GPU: wall; CPU: the runner's CPU time)
  std::vector<double> observed_, reported_, live_overhead_, live_net_overhead_;
  std::vector<double> waited_;  // per timed call: the runner's wait for a CPU (GPU; 0 on the CPU)
};

}  // namespace leap
