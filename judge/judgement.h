// One evaluation by the judge as a sequence of phases: the task's tensors, the reference's time,
// the runner and its calibration, the candidate's load, its correctness trials, timed calls and
// kept verifications, and the verdict. The parts own what they decide: the runner's conversation
// (pool/runner_session.h), the calibration and escape check (timing/calibration.h), the call
// budget (timing/call_budget.h), the tensors and their checks (check/checker.h). Setup, load and
// verdict in judgement.cpp; the calls in judgement_calls.cpp. Only judge/evaluation.cpp makes one.
#pragma once
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/outcome.h"
#include "judge/check/checker.h"
#include "judge/device/gpu_lock.h"
#include "judge/pool/runner_pool.h"
#include "judge/pool/runner_session.h"
#include "judge/timing/calibration.h"
#include "judge/timing/call_budget.h"
#include "judge/timing/timing.h"

namespace leap {

// What an evaluation is judged by, read once from its request: [eval] whole, and the two
// [sandbox] limits that travel with it.
struct JudgeSettings {
  EvalConfig eval;
  double deadline_s = 0;   // the candidate's load and calls
  uint64_t memory_mb = 0;  // its runner's host memory
};
JudgeSettings judge_settings(proto::EvalSettings::Reader s);

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
  // One trusted no-op call on `r`: what the judge observes beyond what the runner reports, and of
  // it the runner's wait for a CPU (GPU; 0 on the CPU).
  bool calibrate(Runner& r, double* excess, double* waited, std::string* why = nullptr);
  // The overhead again, now, on a spare runner that never held a candidate and shares the
  // candidate runner's core: the machine's load at this moment, which the candidate cannot touch.
  void recalibrate(bool record = true);
  // The candidate's library checked for forbidden imports, then loaded in the runner.
  bool load();
  int python_manifest(std::vector<int>& extensions) const;

  // Correctness trials, the timed phase, extra checks of an implausible speedup, and the kept
  // timed calls verified once no candidate code runs.
  bool calls();
  // Warm-up and timed calls, the device the judge's alone (GpuLock): `samples` are the timings,
  // re-measured once when the first ones do not agree with what the judge observed.
  bool timed_phase(std::vector<double>& samples);
  // Timed calls into `samples`, then the last one verified in place (its inputs too). Until the
  // timing is precise enough, a spare calibrated after every other call; `paired`: a fixed
  // number of calls, each followed by a calibration.
  bool timed_calls(std::vector<double>& samples, bool paired);
  // One call: fresh inputs, poisoned outputs, the runner's reply, and the judge's checks.
  bool call(Phase phase, bool verify, double* elapsed_us);
  bool await_call(const runner::Command& c, size_t index, runner::Reply* r, double* wall, double* own_us,
                  double* waited_us);
  bool reply_answers(const runner::Command& c, const runner::Reply& r);
  // The escape check (Calibration::check); `final`: its verdict is recorded.
  bool timing_consistent(bool final);
  // A task may require a correct kernel to be fast (KernelBench's fast_p): judged on the
  // measured speedup, once the timing is done.
  bool fast_enough();
  // [eval] profile: an ok CUDA candidate's kernels measured after the verdict (judge/device/profiler.h).
  void profile();

  // Kills the runner; on the GPU, an arena its work may still reach is never handed to the next
  // evaluation (Workspace::quarantine).
  void retire_runner();
  bool threads_unchanged();
  // A judge-side failure once candidate code has run: the candidate's fault if the judge works
  // again as soon as the runner is gone (it held the device's memory, say), else leap's.
  void blame_after_failure(const std::exception& e);
  // Records the verdict; false, so that a phase can `return fail(...)`.
  bool fail(Status s, Check check, const std::string& feedback);
  bool fail(const Verdict& v) { return fail(v.status, v.check, v.feedback); }

  proto::EvalRequest::Reader req_;
  const JudgeSettings settings_;
  Device& dev_;
  RunnerPool& pool_;
  const bool python_;  // a KernelBench-format candidate (the Python runner)
  ReferenceTimings& cache_;
  Workspace& workspace_;
  GpuLock& lock_;
  EvalOutcome& o_;
  Checker checker_;
  Slots slots_;
  std::shared_ptr<Arena> arena_;
  std::unique_ptr<RunnerSession> session_;
  Calibration calibration_;
  CallBudget budget_;
  std::mt19937_64 keep_rng_;
  size_t last_slot_ = 0;
  double last_wall_us_ = 0;
  double last_observed_us_ = 0;  // the last call as the judge observed it (GPU: wall; CPU: the runner's CPU time)
};

}  // namespace leap
