// The judge's handle on one runner process (leap-runner or a Python runner): one request at a
// time with a deadline, the kernel's stamps on its replies, its threads and CPU time counted from
// outside, and killing it. Nothing it sends is trusted beyond its size.
#pragma once
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/subprocess.h"
#include "judge/pool/zygote.h"
#include "judge/runner/protocol.h"
#include "judge/timing/timing.h"

namespace leap {

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
  Wait request(const runner::Command& c, const std::vector<int>& fds, Clock::time_point deadline, runner::Reply* r,
               double* wall_us);
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
  double start_us = 0;      // the runner's own account of its start (diagnostics, untrusted)
  double made_us = 0;       // of it, the start itself without the wait for a timing judge
  int batch = 1;            // runners started together with it (itself included)
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

}  // namespace leap
