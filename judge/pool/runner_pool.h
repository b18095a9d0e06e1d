// The judge's runners: starting them inside bubblewrap (or forked from the Python runners' zygote),
// pre-started spares, and retiring used ones. A runner serves one candidate and is discarded.
#pragma once
#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/subprocess.h"
#include "judge/pool/runner.h"
#include "judge/pool/zygote.h"

namespace leap {

struct RunnerOptions {
  std::string runner_path;  // leap-runner (beside it: pyrunner.py and libleap-pyrunner.so)
  // Set: Python runners (KernelBench-format candidates), pyrunner.py in this interpreter, their
  // view what its imports need (python_view).
  std::string python;
  std::string bwrap = "bwrap";
  bool namespaces = true;  // false: no bubblewrap (machines without user namespaces; weaker)
  bool seccomp = true;
  bool cuda = false;
  int device = 0;
  int capability = 0;  // the GPU's compute capability (90): a CUDA zygote compiles Triton's first kernel for it
  int core = -1;       // CPU core the runner is pinned to (-1: none)
  int spares = 2;
  int cuda_connections = 0;  // CUDA_DEVICE_MAX_CONNECTIONS of a runner (0: the driver's default)
  double start_timeout_s = 60;
  // The replacement for a taken runner starts once the evaluation is over (judge_idle), not
  // while it is timed: on the CPU a runner's start (bubblewrap, exec, filter) beside a timed call,
  // on a sibling hyperthread or sharing its caches, inflated a 0.6 ms call by up to 1.5x.
  bool replace_after_use = false;
  // The judges' GPU lock (gpu_lock_path; "" for none): a runner creates its CUDA context under a
  // shared hold, never while a judge times. Context creation beside a timed GEMM stretched its
  // slowest tenth of calls by 10 % on the H200 (bench: the judge's runner-start interference).
  std::string gpu_lock;
  // Spares are started again, all at once, when fewer than this many are left (or when the judge
  // is idle: replenish): with the GPU lock a batch of starts costs one evaluation one wait instead
  // of every evaluation waiting for its replacement's context. 0: refill after every take.
  int refill_below = 0;
  // Python runners forked from a zygote, one interpreter per pool that has imported PyTorch (and
  // Triton) once, in one sandbox with its runners: a runner starts without the seconds of import.
  // false: each runner a sandbox and an interpreter of its own.
  bool zygote = true;
};

class RunnerPool {
 public:
  explicit RunnerPool(RunnerOptions opts);
  ~RunnerPool();
  // A started runner (ready reply received), or nullptr with *why. *waited_us: the time spent
  // waiting for it to finish starting (0 when a spare was ready).
  std::unique_ptr<Runner> take(std::string* why, double* waited_us);
  // A started spare that never held a candidate (for trusted calibration calls), or nullptr.
  Runner* idle_spare();
  // A spare whose trusted call went wrong (no reply by the deadline: one may still come): never
  // handed to a candidate, where the late reply would answer the wrong request.
  void discard_spare(Runner* r);
  // Starts spares up to the configured count.
  void replenish();
  // replenish() once fewer than refill_below spares are left (and always when none is).
  void top_up();
  // Batches (refill_below): as many missing spares as can start within `untimed_ms` of the judge's
  // work that is never timed (a slow candidate's correctness trials), from what recent starts cost,
  // so that their contexts are made then rather than before a timing that waits for them.
  void refill_during(double untimed_ms);
  // A spare is still starting (its CUDA context being made): a call now may be stalled by it.
  bool starting();
  size_t spares() const { return spares_.size(); }
  // What one start costs, as recent starts went (0: none seen yet).
  double start_cost_ms() const { return std::max(window_ms_[0], window_ms_[1]); }
  // Waits until every spare has started (or failed to); returns how many are ready. The judge
  // does this before it reports ready, so that its first evaluations take started runners.
  int prime();
  // Waits (up to `seconds`) for spares still starting: nothing of leap's own starts beside a timing.
  void settle(double seconds);
  // Kills a used runner; `keep` (e.g. its GPU buffers) is released once the runner is gone.
  void retire(std::unique_ptr<Runner> r, std::shared_ptr<void> keep = nullptr);
  void collect();  // releases what retired runners no longer use
  bool idle() {    // every retired runner gone
    collect();
    return retired_.empty();
  }
  bool wait_idle(double seconds);  // idle() within `seconds`
  // The first retired runner still alive, as the kernel shows it (for leap's own error message).
  std::string lingering();
  // What the Python runners' zygote wrote to its stderr ("" without one): diagnostics.
  std::string zygote_stderr() { return zygote_ ? zygote_->stderr_tail() : ""; }

 private:
  std::unique_ptr<Runner> spawn();
  std::unique_ptr<Runner> fork();  // from the zygote (started first when there is none alive)
  void start_zygote();
  std::vector<std::string> argv(bool zygote = false) const;
  std::string script() const;  // the Python runner's pyrunner.py and native part, beside leap-runner
  std::string native() const;

  void start(int n);  // n more spares, started together
  // Whether a spare has started (by `deadline`); notes its start time (its own account: a spare has
  // run leap's code only).
  bool is_ready(Runner& r, Clock::time_point deadline, Runner::Wait* how = nullptr);

  RunnerOptions opts_;
  std::vector<std::string> libraries_;  // the runner's whole filesystem (runner_libraries)
  std::vector<std::string> folders_;    // and, for a Python runner, the folders it imports from
  Launcher launcher_;
  std::shared_ptr<Zygote> zygote_;
  uint64_t tokens_ = 0;
  double window_ms_[2] = {0, 0};  // one start's cost, the most in the previous and the current window
  int starts_seen_ = 0;
  std::deque<std::unique_ptr<Runner>> spares_;
  struct Retired {
    std::unique_ptr<Runner> runner;
    std::shared_ptr<void> keep;
  };
  std::deque<Retired> retired_;
};

}  // namespace leap
