#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/error.h"

extern char** environ;

namespace leap {

bool read_tail(int fd, std::string& tail, size_t cap) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 && errno == EAGAIN;
    tail.append(buf, static_cast<size_t>(n));
    if (tail.size() > cap) tail.erase(0, tail.size() - cap);
  }
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::pair<int, int> make_pipe() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw_errno("pipe2");
  return {p[0], p[1]};
}

ChildProcess::ChildProcess(const SpawnSpec& spec) {
  int highest = 2;
  for (auto [parent, child] : spec.fds) highest = std::max(highest, child);
  // A source numbered like a target would be overwritten by an earlier dup2 (or keep its
  // close-on-exec flag when it is its own target): such sources are moved above the targets first.
  std::vector<std::pair<int, int>> fds;
  std::vector<int> moved;
  struct CloseMoved {
    std::vector<int>& fds;
    ~CloseMoved() {
      for (int fd : fds) ::close(fd);
    }
  } close_moved{moved};
  for (auto [parent, child] : spec.fds) {
    if (parent <= highest) {
      int above = ::fcntl(parent, F_DUPFD_CLOEXEC, highest + 1);
      if (above < 0) throw_errno("dup a descriptor for a child");
      moved.push_back(above);
      parent = above;
    }
    fds.emplace_back(parent, child);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (spec.stdout_fd >= 0) posix_spawn_file_actions_adddup2(&fa, spec.stdout_fd, 1);
  else posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  if (spec.stderr_fd >= 0) posix_spawn_file_actions_adddup2(&fa, spec.stderr_fd, 2);
  else posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  for (auto [parent, child] : fds) posix_spawn_file_actions_adddup2(&fa, parent, child);
  posix_spawn_file_actions_addclosefrom_np(&fa, highest + 1);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);

  std::vector<char*> argv;
  for (auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) env_storage.emplace_back(*e);
  env_storage.insert(env_storage.end(), spec.env.begin(), spec.env.end());
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  int rc = posix_spawnp(&pid_, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    pid_ = -1;
    throw LeapError("cannot start " + spec.argv[0] + ": " + std::strerror(rc));
  }
}

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this != &o) {
    kill();
    pid_ = std::exchange(o.pid_, -1);
  }
  return *this;
}

ChildProcess::~ChildProcess() { kill(); }

void ChildProcess::kill() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  wait();
}

std::optional<int> ChildProcess::try_wait() {
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    ::kill(-pid_, SIGKILL);  // leftovers of its group
    pid_ = -1;
    return status;
  }
  return std::nullopt;
}

int ChildProcess::wait() {
  if (pid_ <= 0) return 0;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  ::kill(-pid_, SIGKILL);
  pid_ = -1;
  return status;
}

struct Launcher::State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::packaged_task<ChildProcess()>> jobs;
  bool stopping = false;
  std::thread thread;
};

Launcher::Launcher() : state_(std::make_unique<State>()) {
  state_->thread = std::thread([s = state_.get()] {
    for (;;) {
      std::packaged_task<ChildProcess()> job;
      {
        std::unique_lock<std::mutex> lock(s->mu);
        s->cv.wait(lock, [&] { return s->stopping || !s->jobs.empty(); });
        if (s->jobs.empty()) return;
        job = std::move(s->jobs.front());
        s->jobs.pop_front();
      }
      job();
    }
  });
}

Launcher::~Launcher() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

ChildProcess Launcher::spawn(const SpawnSpec& spec) {
  std::packaged_task<ChildProcess()> job([&spec] { return ChildProcess(spec); });
  auto result = job.get_future();
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->jobs.push_back(std::move(job));
  }
  state_->cv.notify_one();
  return result.get();
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "status " + std::to_string(status);
}

CommandResult run_command(const std::vector<std::string>& argv, double timeout_s, size_t max_output) {
  CommandResult result;
  auto t0 = Clock::now();
  auto [rd, wr] = make_pipe();
  SpawnSpec spec;
  spec.argv = argv;
  spec.stdout_fd = wr;
  spec.stderr_fd = wr;
  ChildProcess child(spec);
  ::close(wr);
  auto deadline = after_seconds(timeout_s);
  char buf[8192];
  for (;;) {
    double left = millis_until(deadline);
    if (left <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd p{rd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min(left, 1000.0)) + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    ssize_t r = ::read(rd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (result.output.size() < max_output)
      result.output.append(buf, std::min<size_t>(static_cast<size_t>(r), max_output - result.output.size()));
  }
  ::close(rd);
  int status = 0;
  if (result.timed_out) {
    child.kill();
  } else {
    status = child.wait();
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  }
  result.wall_us = micros_since(t0);
  return result;
}

}  // namespace leap
