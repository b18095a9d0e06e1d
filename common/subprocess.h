// Child processes started with posix_spawn (never fork(): the parent may hold MPI or CUDA
// state). RAII: a ChildProcess that goes out of scope kills and reaps its process group.
#pragma once
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace leap {

struct SpawnSpec {
  std::vector<std::string> argv;
  std::vector<std::pair<int, int>> fds;  // {parent fd, child fd}; everything else is closed
  std::vector<std::string> env;          // extra NAME=VALUE entries over the parent's environment
  int stdout_fd = -1;                    // -1: /dev/null
  int stderr_fd = -1;                    // -1: /dev/null
};

class ChildProcess {
 public:
  ChildProcess() = default;
  explicit ChildProcess(const SpawnSpec& spec);  // throws LeapError when spawn fails
  ChildProcess(ChildProcess&& o) noexcept : pid_(std::exchange(o.pid_, -1)) {}
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  void kill();                      // SIGKILL to the process group, then reap
  std::optional<int> try_wait();    // raw wait status once exited
  int wait();                       // raw wait status

 private:
  pid_t pid_ = -1;
};

// Starts children from a thread of its own. A child that arms PR_SET_PDEATHSIG dies with the
// thread that started it, not with the process: starting it from a short-lived worker thread
// would kill it when that thread ends. Children of a Launcher live as long as the Launcher.
class Launcher {
 public:
  Launcher();
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;
  ChildProcess spawn(const SpawnSpec& spec);  // throws LeapError as ChildProcess does

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct CommandResult {
  int exit_code = -1;      // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;
  std::string output;      // stdout and stderr, interleaved, capped
  double wall_us = 0;
};

// Runs a command to completion with a wall-clock timeout (then SIGKILL of its group).
CommandResult run_command(const std::vector<std::string>& argv, double timeout_s,
                          size_t max_output = 1 << 20);

// Describes a wait status: "exit code 3", "signal 11 (Segmentation fault)".
std::string describe_wait_status(int status);

// Reads what a non-blocking descriptor has now into `tail`, keeping its last `cap` bytes (the
// end of a child's stderr, for feedback when it dies). False once it is at its end (or failed).
bool read_tail(int fd, std::string& tail, size_t cap);

// Closes `fd` if it is open and marks it closed (-1).
void close_fd(int& fd);

// A pipe with both ends close-on-exec; throws LeapError.
std::pair<int, int> make_pipe();

}  // namespace leap
