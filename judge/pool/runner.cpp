#include "judge/pool/runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>

#include "common/error.h"
#include "common/subprocess.h"
#include "judge/timing/timing.h"

namespace leap {
namespace {

constexpr size_t kStderrCap = 4096;

// What the judge reads of /proc/PID/stat: "PID (comm)", the state letter and the task's flags;
// nullopt once the process is gone.
struct ProcStat {
  std::string name;
  char state = '?';
  unsigned long flags = 0;
};
std::optional<ProcStat> proc_stat(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!stat || !std::getline(stat, line)) return std::nullopt;
  auto close = line.rfind(')');  // the name may hold spaces and parentheses
  if (close == std::string::npos || close + 2 >= line.size()) return std::nullopt;
  ProcStat st;
  st.name = line.substr(0, close + 1);
  std::istringstream fields(line.substr(close + 2));
  std::string skip;
  fields >> st.state;
  for (int i = 0; i < 5; ++i) fields >> skip;  // ppid pgrp session tty_nr tpgid
  fields >> st.flags;
  return st;
}

}  // namespace

Runner::Runner(ChildProcess outer, int channel, int err, int info)
    : outer_(std::move(outer)), channel_(channel), err_(err), info_(info) {
  if (info_ < 0) sandbox_pid_ = runner_pid_ = outer_.pid();
  // The kernel stamps each reply as the runner sends it: a call's end that neither the runner nor
  // the judge's own wait for a CPU can move.
  const int on = 1;
  ::setsockopt(channel_, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
}

Runner::Runner(std::shared_ptr<Zygote> zygote, uint64_t token, int channel, int err)
    : zygote_(std::move(zygote)), token_(token), channel_(channel), err_(err) {
  const int on = 1;
  ::setsockopt(channel_, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
}

Runner::~Runner() {
  kill();
  if (zygote_) zygote_->forget(token_);
  close_fd(pidfd_);
  close_fd(channel_);
  close_fd(err_);
  close_fd(info_);
}

void Runner::drain_stderr() {
  // At its end (the runner closed it, or is gone) it is read no more: poll would report it ready
  // at once, again and again, while the judge waits for a reply.
  if (err_ >= 0 && !read_tail(err_, stderr_, kStderrCap)) close_fd(err_);
}

std::string Runner::stderr_tail() {
  drain_stderr();
  return stderr_;
}

Runner::Wait Runner::await(Clock::time_point deadline, runner::Reply* r) {
  for (;;) {
    double left = millis_until(deadline);  // <= 0: one look without waiting
    pollfd p[2] = {{channel_, POLLIN, 0}, {err_, POLLIN, 0}};
    int n = ::poll(p, 2, left <= 0 ? 0 : static_cast<int>(std::min(left, 1000.0)) + 1);
    if (n < 0 && errno != EINTR) throw_errno("poll runner");
    if (p[1].revents) drain_stderr();
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      if (left <= 0) return Wait::deadline;
      continue;
    }
    // A control buffer with room for the timestamp alone: descriptors a runner tries to pass do not
    // fit and are discarded by the kernel (any that arrive anyway are closed).
    iovec io{r, sizeof *r};
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(timespec)) + CMSG_SPACE(sizeof(ucred))];
    msghdr m{};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = ctrl;
    m.msg_controllen = sizeof ctrl;
    ssize_t got = ::recvmsg(channel_, &m, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    replied_at_ = {};
    for (cmsghdr* h = got > 0 ? CMSG_FIRSTHDR(&m) : nullptr; h; h = CMSG_NXTHDR(&m, h)) {
      if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_TIMESTAMPNS && h->cmsg_len >= CMSG_LEN(sizeof(timespec)))
        std::memcpy(&replied_at_, CMSG_DATA(h), sizeof replied_at_);
      if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_CREDENTIALS && h->cmsg_len >= CMSG_LEN(sizeof(ucred)))
        std::memcpy(&sender_, CMSG_DATA(h), sizeof sender_);
      if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
        for (size_t k = 0; k < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++k) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(h) + k * sizeof(int), sizeof fd);
          ::close(fd);
        }
    }
    if (got <= 0) {
      drain_stderr();
      return Wait::eof;
    }
    if (got != static_cast<ssize_t>(sizeof *r) || r->magic != runner::kMagic) return Wait::malformed;
    r->message[sizeof r->message - 1] = '\0';
    return Wait::reply;
  }
}

Runner::Wait Runner::request(const runner::Command& c, const std::vector<int>& fds, Clock::time_point deadline,
                             runner::Reply* r, double* wall_us) {
  auto t0 = Clock::now();
  timespec t0_at{};
  ::clock_gettime(CLOCK_REALTIME, &t0_at);  // the clock of the kernel's stamps
  settled = false;
  if (!send_with_fds(channel_, &c, sizeof c, fds)) return Wait::eof;
  sent_ = Clock::now();
  ::clock_gettime(CLOCK_REALTIME, &sent_at_);
  Wait w = await(deadline, r);
  const double read_us = micros_since(t0);
  // To the kernel's stamp on the reply where it has one: the judge's own wake-up after the reply
  // arrived is not the call's, and grows with the wait (an idle core's deeper sleep state over a
  // call of hundreds of microseconds). Never past the judge's own reading (a stepped clock).
  const double stamped = w == Wait::reply && stamped_reply() ? micros_between(t0_at, replied_at_) : -1;
  *wall_us = stamped >= 0 && stamped <= read_us ? stamped : read_us;
  settled = w == Wait::reply;  // it synchronised the device before answering
  return w;
}

pid_t Runner::runner_pid() {
  if (runner_pid_ > 0) return runner_pid_;
  if (sandbox_pid_ < 0 && info_ >= 0) {
    // bubblewrap's --info-fd: {"child-pid": N, ...}, the sandbox's init in our namespace.
    char buf[512] = {};
    ssize_t n = ::read(info_, buf, sizeof buf - 1);
    if (n > 0)
      if (const char* p = std::strstr(buf, "\"child-pid\"")) sandbox_pid_ = std::atoi(std::strchr(p, ':') + 1);
  }
  if (sandbox_pid_ <= 0) return -1;
  // The runner is the init's only child.
  std::ifstream children("/proc/" + std::to_string(sandbox_pid_) + "/task/" + std::to_string(sandbox_pid_) +
                         "/children");
  pid_t child = -1;
  if (children >> child) runner_pid_ = child;
  return runner_pid_;
}

int Runner::threads() {
  pid_t pid = runner_pid();
  if (pid <= 0) return -1;
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (!d) return -1;
  int n = 0;
  while (auto* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

double Runner::cpu_time_us() {
  pid_t pid = runner_pid();
  clockid_t clock;
  timespec ts{};
  if (pid <= 0 || ::clock_getcpuclockid(pid, &clock) != 0 || ::clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double Runner::reply_after_us() const {
  if (!stamped_reply()) return -1;
  const double us = micros_between(sent_at_, replied_at_);
  // Slightly negative: the runner answered before the judge was back from the send. Far
  // negative: the realtime clock stepped between the two.
  return us >= 0 ? us : us > -1e5 ? 0 : -1;
}

SchedTimes Runner::main_thread_sched() {
  pid_t pid = runner_pid();
  return pid <= 0 ? SchedTimes{} : schedstat_times("/proc/" + std::to_string(pid) + "/schedstat");
}

bool Runner::became_ready(Clock::time_point deadline, Wait* how) {
  runner::Reply hello;
  Wait w = await(deadline, &hello);
  if (how) *how = w;
  ready = w == Wait::reply && hello.kind == runner::ReplyKind::ready;
  if (ready && zygote_) {
    // The sender of the ready reply (sent before any candidate code, so its own) as the kernel
    // stamped it, in the judge's pid namespace; a pidfd so that no later process with its number
    // is ever signalled or waited for.
    ready = sender_.pid > 0;
    if (ready) {
      runner_pid_ = sender_.pid;
      pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, runner_pid_, 0));
    }
  }
  if (ready) {
    start_us = hello.elapsed_us;
    made_us = std::max(hello.elapsed_us - hello.lock_wait_us, 0.0);
  }
  return ready;
}

void Runner::kill() {
  if (zygote_) {
    // Its sandbox is its zygote's and its siblings': the runner alone (it cannot start processes).
    if (pidfd_ >= 0) ::syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
    else zygote_->kill(token_);
    return;
  }
  runner_pid();
  // Killing the namespace's init kills every process in it.
  if (sandbox_pid_ > 0) ::kill(sandbox_pid_, SIGKILL);
  if (runner_pid_ > 0) ::kill(runner_pid_, SIGKILL);
  outer_.kill();
}

std::string Runner::how_it_ended(double wait_s) {
  const auto deadline = after_seconds(wait_s);
  std::optional<int> status;
  if (zygote_) status = zygote_->status(token_, deadline);
  else
    while (!(status = outer_.try_wait()) && millis_until(deadline) > 0) ::usleep(2000);
  if (!status) return "";
  int sig = WIFSIGNALED(*status) ? WTERMSIG(*status) : 0;
  // bubblewrap exits with 128 + the signal that killed its child.
  if (!sig && info_ >= 0 && WIFEXITED(*status) && WEXITSTATUS(*status) > 128 && WEXITSTATUS(*status) < 128 + 65)
    sig = WEXITSTATUS(*status) - 128;
  if (!sig) return "exit code " + std::to_string(WIFEXITED(*status) ? WEXITSTATUS(*status) : *status);
  const char* abbrev = ::sigabbrev_np(sig);
  return "killed by " + (abbrev ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig)) + " (" +
         ::strsignal(sig) + ")";
}

bool Runner::exited(bool exit_path_is_enough) {
  if (zygote_ && pidfd_ < 0) return zygote_->status(token_, Clock::now()).has_value();
  if (pidfd_ >= 0) {  // readable once the process has exited (its resources released)
    pollfd p{pidfd_, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) return true;
  }
  if (runner_pid_ <= 0) return true;
  auto st = proc_stat(runner_pid_);
  if (!st || st->state == 'Z' || st->state == 'X') return true;
  if (!exit_path_is_enough) return false;
  // Killed (SIGKILL pending: it dies before it could return to its code) or in its exit path
  // (PF_EXITING): no code of the candidate's runs again. On a loaded machine the kernel can take
  // tens of seconds to schedule the dying runner and tear down its namespaces; on the CPU
  // nothing else of it can outlive it.
  constexpr unsigned long kPfExiting = 0x4;
  return (st->flags & kPfExiting) || kill_pending();
}

bool Runner::lost() {
  if (zygote_ && zygote_->ended()) return true;
  return ready && pid() > 0 && exited();
}

bool Runner::kill_pending() {
  std::ifstream status("/proc/" + std::to_string(runner_pid_) + "/status");
  for (std::string l; std::getline(status, l);)
    if (l.rfind("ShdPnd:", 0) == 0 || l.rfind("SigPnd:", 0) == 0)
      if (std::stoull(l.substr(7), nullptr, 16) & (1ull << (SIGKILL - 1))) return true;
  return false;
}

std::string Runner::proc_state() {
  auto st = runner_pid_ > 0 ? proc_stat(runner_pid_) : std::nullopt;
  if (!st) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "pid %d, state %c, flags 0x%lx%s, %s", static_cast<int>(runner_pid_), st->state,
                st->flags, kill_pending() ? ", SIGKILL pending" : "", st->name.c_str());
  return buf;
}

}  // namespace leap
