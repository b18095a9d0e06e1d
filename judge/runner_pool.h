// The judge's side of leap-runner: starting runners inside bubblewrap, pre-started spares, one
// request at a time with a deadline, the runner's threads counted from outside, and killing it.
// A runner serves one candidate and is discarded; nothing it sends is trusted beyond its size.
#pragma once
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/subprocess.h"
#include "judge/timing.h"
#include "judge/runner/protocol.h"
#include "judge/zygote.h"

namespace leap {

struct RunnerOptions {
  std::string runner_path;    // leap-runner (beside it: pyrunner.py and libleap-pyrunner.so)
  // Set: Python runners (KernelBench-format candidates), pyrunner.py in this interpreter, their
  // view what its imports need (python_view).
  std::string python;
  std::string bwrap = "bwrap";
  bool namespaces = true;     // false: no bubblewrap (machines without user namespaces; weaker)
  bool seccomp = true;
  bool cuda = false;
  int device = 0;
  int capability = 0;         // the GPU's compute capability (90): a CUDA zygote compiles Triton's first kernel for it
  int core = -1;              // CPU core the runner is pinned to (-1: none)
  int spares = 2;
  int cuda_connections = 0;   // CUDA_DEVICE_MAX_CONNECTIONS of a runner (0: the driver's default)
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

// What a runner may load, its only files: the runner's own libraries (the CUDA runtime,
// libseccomp), the C and C++ runtimes and libm a candidate links, and, with `cuda`, the
// driver's user-space pieces. Vendor compute
// libraries (cuBLAS, cuDNN, OpenBLAS, MKL) and everything else on the host are absent, so no
// path reaches them, however dlopen is reached.
std::vector<std::string> runner_libraries(const std::string& runner_path, bool cuda);

class Runner {
 public:
  enum class Wait { reply, eof, deadline, malformed };

  Runner(ChildProcess outer, int channel, int err, int info);
  // A runner forked by `zygote`: its pid is the one the kernel stamps on its ready reply.
  Runner(std::shared_ptr<Zygote> zygote, uint64_t token, int channel, int err);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Sends `c` (with descriptors) and waits for one reply until `deadline`; *wall_us is the
  // judge's own clock from just before the send to the reply's arrival (the kernel's stamp on it;
  // where it has none, to the judge's reading it).
  Wait request(const runner::Command& c, const std::vector<int>& fds, Clock::time_point deadline,
               runner::Reply* r, double* wall_us);
  Wait await(Clock::time_point deadline, runner::Reply* r);
  pid_t pid() { return runner_pid(); }  // in the judge's pid namespace (-1 while unknown)
  // Threads of the runner process, counted by the judge from /proc (-1 if it is gone).
  int threads();
  // CPU time the runner's threads have run, in microseconds, from the kernel's accounting (its
  // process CPU clock): what a CPU candidate cannot forge and a busy machine does not inflate.
  double cpu_time_us();
  // When the last request's send returned: the latest the runner can have had it. A judge that
  // the load holds back between its stamp and the send must not count that as the call's time.
  Clock::time_point sent() const { return sent_; }
  // From the last request's send returning to its reply's arrival, by the kernel's stamp on the
  // reply (the judge's own later wake-up not included); 0 when the reply came first; -1 when the
  // reply carried no stamp.
  double reply_after_us() const;
  // The runner's main thread (where leap_kernel runs) in the kernel's scheduler account
  // (/proc/PID/schedstat): its time on a CPU and its time ready to run but waiting for one, in
  // microseconds; -1 each where the kernel does not keep it.
  SchedTimes main_thread_sched();
  std::string stderr_tail();
  // How the runner's process ended, once it has (waiting up to `wait_s`): "killed by SIGSEGV
  // (Segmentation fault)", "exit code 3"; "" while it runs.
  std::string how_it_ended(double wait_s);
  // Kills everything in the sandbox; exited() turns true once the runner has released its
  // resources (its GPU context among them).
  void kill();
  // `exit_path_is_enough`: also once it is killed (SIGKILL pending) or in its exit path (the CPU:
  // nothing of it outlives that; not the GPU, where the driver releases the context and memory on
  // the way out).
  bool exited(bool exit_path_is_enough = false);
  // A spare no evaluation can use: its zygote ended (it ends with it, if it has not yet), or, once
  // ready, its process did.
  bool lost();
  // "pid N, state S, flags 0x..., SIGKILL pending" from /proc ("" once gone).
  std::string proc_state();
  // The runner's start-up reply, waited for until `deadline` (a look without waiting when past).
  bool became_ready(Clock::time_point deadline, Wait* how = nullptr);
  bool ready = false;
  // Every request answered (after the runner synchronised the device) and no thread of the
  // candidate's left: no GPU work of its can still be running once it is killed.
  bool settled = true;
  double start_us = 0;  // the runner's own account of its start (diagnostics, untrusted)
  double made_us = 0;   // of it, the start itself without the wait for a timing judge
  int batch = 1;        // runners started together with it (itself included)
  double cpu_mark_us = -1;  // cpu_time_us() where the judge's last window on it closed (-1: none)

 private:
  pid_t runner_pid();
  void drain_stderr();
  bool kill_pending();

  ChildProcess outer_;
  std::shared_ptr<Zygote> zygote_;
  uint64_t token_ = 0;
  int pidfd_ = -1;  // a forked runner's, from its ready reply: signals reach it and no later process
  int channel_ = -1, err_ = -1, info_ = -1;
  timespec sent_at_{}, replied_at_{};  // CLOCK_REALTIME, the clock of the kernel's stamps
  bool stamped_reply() const { return replied_at_.tv_sec != 0 || replied_at_.tv_nsec != 0; }
  static double micros_between(const timespec& from, const timespec& to) {
    return static_cast<double>(to.tv_sec - from.tv_sec) * 1e6 + static_cast<double>(to.tv_nsec - from.tv_nsec) / 1e3;
  }
  ucred sender_{};  // the last reply's sender as the kernel stamped it (forked runners)
  Clock::time_point sent_{};
  pid_t sandbox_pid_ = -1, runner_pid_ = -1;
  std::string stderr_;
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
  bool idle() {  // every retired runner gone
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
