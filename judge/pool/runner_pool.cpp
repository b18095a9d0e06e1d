// The pool of runners: starting them (directly, or forked from the Python runners' zygote), the
// spares (when they start, in batches or during untimed work, and which one an evaluation takes),
// and retiring used ones.
#include "judge/pool/runner_pool.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "common/clock.h"
#include "common/error.h"
#include "common/subprocess.h"
#include "judge/device/gpu_lock.h"
#include "sandbox/bwrap.h"

namespace leap {

RunnerPool::RunnerPool(RunnerOptions opts) : opts_(std::move(opts)) {
  if (opts_.namespaces && !opts_.python.empty()) {
    auto view = python_view(opts_.python, script(), native(), opts_.cuda);
    libraries_ = std::move(view.files);
    folders_ = std::move(view.folders);
  } else if (opts_.namespaces) {
    libraries_ = runner_libraries(opts_.runner_path, opts_.cuda);
  }
  replenish();
}

RunnerPool::~RunnerPool() = default;

std::string RunnerPool::script() const {
  return std::filesystem::path(opts_.runner_path).parent_path().string() + "/pyrunner.py";
}

std::string RunnerPool::native() const {
  return std::filesystem::path(opts_.runner_path).parent_path().string() + "/libleap-pyrunner.so";
}

std::vector<std::string> RunnerPool::argv(bool zygote) const {
  std::vector<std::string> runner = {opts_.runner_path};
  if (!opts_.python.empty()) runner = {opts_.python, "-I", "-B", script(), native()};
  runner.insert(runner.end(), {"--backend", opts_.cuda ? "cuda" : "cpu", "--device", std::to_string(opts_.device),
                               "--core", std::to_string(opts_.core)});
  if (!opts_.seccomp) runner.push_back("--no-seccomp");
  if (opts_.cuda && opts_.cuda_connections > 0)
    runner.insert(runner.end(), {"--cuda-connections", std::to_string(opts_.cuda_connections)});
  if (!opts_.gpu_lock.empty()) runner.push_back("--gpu-lock");
  if (std::getenv("LEAP_RUNNER_SECCOMP_DEBUG")) runner.push_back("--seccomp-debug");
  if (zygote) runner.push_back("--zygote");
  if (!opts_.python.empty() && opts_.cuda && opts_.capability > 0)
    runner.insert(runner.end(), {"--capability", std::to_string(opts_.capability)});
  if (!opts_.namespaces) return runner;
  std::vector<std::string> a =
      runner_view_args(opts_.bwrap, opts_.python.empty() ? opts_.runner_path : script(), libraries_, opts_.cuda);
  bwrap_folders(a, folders_);
  if (!zygote) a.insert(a.end(), {"--info-fd", "4"});
  a.emplace_back("--");
  a.insert(a.end(), runner.begin(), runner.end());
  return a;
}

std::unique_ptr<Runner> RunnerPool::spawn() {
  if (opts_.zygote && !opts_.python.empty()) return fork();
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) throw_errno("socketpair");
  auto [err_r, err_w] = make_pipe();
  int info_r = -1, info_w = -1;
  if (opts_.namespaces) std::tie(info_r, info_w) = make_pipe();
  int gate = -1, lock = -1;
  SpawnSpec spec;
  spec.argv = argv();
  spec.fds = {{sv[1], 3}};
  if (info_w >= 0) spec.fds.emplace_back(info_w, 4);
  spec.stderr_fd = err_w;
  ChildProcess child;
  try {
    if (!opts_.gpu_lock.empty()) {
      std::tie(gate, lock) = open_gpu_lock_files(opts_.gpu_lock);
      spec.fds.insert(spec.fds.end(), {{gate, 5}, {lock, 6}});
    }
    child = launcher_.spawn(spec);
  } catch (...) {
    for (int fd : {sv[0], sv[1], err_r, err_w, info_r, info_w, gate, lock})
      if (fd >= 0) ::close(fd);
    throw;
  }
  for (int fd : {sv[1], err_w, info_w, gate, lock})
    if (fd >= 0) ::close(fd);
  ::fcntl(err_r, F_SETFL, O_NONBLOCK);
  return std::make_unique<Runner>(std::move(child), sv[0], err_r, info_r);
}

void RunnerPool::discard_spare(Runner* r) {
  for (auto it = spares_.begin(); it != spares_.end(); ++it)
    if (it->get() == r) {
      auto owned = std::move(*it);
      spares_.erase(it);
      retire(std::move(owned));
      return;
    }
}

void RunnerPool::retire(std::unique_ptr<Runner> r, std::shared_ptr<void> keep) {
  r->kill();
  retired_.push_back({std::move(r), std::move(keep)});
  collect();
}

bool RunnerPool::wait_idle(double seconds) {
  auto deadline = after_seconds(seconds);
  while (!idle()) {
    if (millis_until(deadline) <= 0) return false;
    ::usleep(2000);
  }
  return true;
}

std::string RunnerPool::lingering() {
  collect();
  return retired_.empty() ? "" : retired_.front().runner->proc_state();
}

void RunnerPool::collect() {
  while (!retired_.empty() && retired_.front().runner->exited(!opts_.cuda)) retired_.pop_front();
}

void RunnerPool::top_up() {
  if (spares_.empty() || static_cast<int>(spares_.size()) < opts_.refill_below) replenish();
}

void RunnerPool::refill_during(double untimed_ms) {
  const int missing = opts_.spares - static_cast<int>(spares_.size());
  if (opts_.refill_below >= opts_.spares || missing <= 0) return;
  if (start_cost_ms() <= 0) return;
  // As many as fit: the driver makes contexts one after another, so a batch takes its size times one.
  start(std::min(missing, static_cast<int>(untimed_ms / start_cost_ms())));
}

bool RunnerPool::starting() {
  bool any = false;
  for (auto& r : spares_) {
    auto w = Runner::Wait::reply;
    any |= !is_ready(*r, Clock::now(), &w) && w == Runner::Wait::deadline;  // not one that died
  }
  return any;
}

bool RunnerPool::is_ready(Runner& r, Clock::time_point deadline, Runner::Wait* how) {
  if (r.ready) return true;
  if (!r.became_ready(deadline, how)) return false;
  // What one start costs (a start in a batch of n shares the driver with n - 1 others), the most
  // over the current and the previous window of a batch's size: the estimate follows the load.
  window_ms_[1] = std::max(window_ms_[1], r.made_us / 1000 / std::max(1, r.batch));
  if (++starts_seen_ % std::max(1, opts_.spares) == 0) {
    window_ms_[0] = window_ms_[1];
    window_ms_[1] = 0;
  }
  return true;
}

void RunnerPool::replenish() { start(std::max(1, opts_.spares) - static_cast<int>(spares_.size())); }

void RunnerPool::start(int n) {
  for (int i = 0; i < n; ++i) {
    spares_.push_back(spawn());
    spares_.back()->batch = n;
  }
}

std::unique_ptr<Runner> RunnerPool::take(std::string* why, double* waited_us) {
  *waited_us = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    // A spare that ended while it waited (its zygote killed, the machine's OOM killer) is not one
    // to hand out: its first call would fail for no fault of the candidate.
    for (size_t i = spares_.size(); i-- > 0;)  // from the back: a discard shifts only later ones
      if (spares_[i]->lost()) discard_spare(spares_[i].get());
    top_up();
    // The first spare that has finished starting; the oldest (started first) when none has.
    auto pick = spares_.begin();
    for (auto it = spares_.begin(); it != spares_.end(); ++it)
      if (is_ready(**it, Clock::now())) {
        pick = it;
        break;
      }
    auto r = std::move(*pick);
    spares_.erase(pick);
    if (!opts_.replace_after_use) top_up();  // replacements start while this one works
    if (r->ready) return r;
    auto t0 = Clock::now();
    Runner::Wait w;
    bool ok = r->became_ready(after_seconds(opts_.start_timeout_s), &w);  // taken: not a spare's start
    *waited_us += micros_since(t0);
    if (ok) return r;
    *why = std::string("the candidate runner failed to start (") +
           (w == Runner::Wait::deadline ? "no answer" : "exited") + "): " + r->stderr_tail();
    if (zygote_ && zygote_->gone()) *why += " (its zygote ended: " + zygote_->stderr_tail() + ")";
  }
  return nullptr;
}

int RunnerPool::prime() {
  replenish();
  settle(opts_.start_timeout_s);
  int ready = 0;
  for (const auto& r : spares_) ready += r->ready;
  return ready;
}

void RunnerPool::settle(double seconds) {
  auto deadline = after_seconds(seconds);
  for (auto& r : spares_) (void)is_ready(*r, deadline);
}

Runner* RunnerPool::idle_spare() {
  for (auto& r : spares_)
    if (is_ready(*r, Clock::now())) return r.get();
  return nullptr;
}

void RunnerPool::start_zygote() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) throw_errno("socketpair");
  auto [err_r, err_w] = make_pipe();
  SpawnSpec spec;
  spec.argv = argv(true);
  spec.fds = {{sv[1], 3}};
  spec.stderr_fd = err_w;
  ChildProcess child;
  try {
    child = launcher_.spawn(spec);
  } catch (...) {
    for (int fd : {sv[0], sv[1], err_r, err_w}) ::close(fd);
    throw;
  }
  ::close(sv[1]);
  ::close(err_w);
  ::fcntl(err_r, F_SETFL, O_NONBLOCK);
  zygote_ = std::make_shared<Zygote>(std::move(child), sv[0], err_r);
}

std::unique_ptr<Runner> RunnerPool::fork() {
  for (int attempt = 0;; ++attempt) {
    if (!zygote_ || zygote_->gone()) start_zygote();
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) throw_errno("socketpair");
    // The kernel stamps the runner's pid on what it sends: set before it can send anything.
    const int on = 1;
    ::setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
    auto [err_r, err_w] = make_pipe();
    std::vector<int> fds = {sv[1], err_w};
    if (!opts_.gpu_lock.empty()) {
      try {
        auto [gate, lock] = open_gpu_lock_files(opts_.gpu_lock);  // a hold of its own (flock: per open file)
        fds.insert(fds.end(), {gate, lock});
      } catch (...) {
        for (int fd : {sv[0], sv[1], err_r, err_w}) ::close(fd);
        throw;
      }
    }
    const bool sent = zygote_->fork(++tokens_, fds);
    for (int fd : fds) ::close(fd);
    ::fcntl(err_r, F_SETFL, O_NONBLOCK);
    // A zygote found gone is started again once; after that the runner's start fails as any does.
    if (sent || attempt > 0) return std::make_unique<Runner>(zygote_, tokens_, sv[0], err_r);
    ::close(sv[0]);
    ::close(err_r);
  }
}

}  // namespace leap
