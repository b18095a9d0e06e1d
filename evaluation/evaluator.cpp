#include "evaluation/evaluator.h"

#include <capnp/message.h>
#include <fmt/format.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <cerrno>

#include "common/clock.h"
#include "common/cores.h"
#include "common/error.h"
#include "common/outcome_proto.h"
#include "proto/leap.capnp.h"
#include "tasks/task_proto.h"

namespace leap {

namespace {
constexpr double kStartTimeoutS = 120;  // LibTorch start-up on a loaded machine
constexpr size_t kStderrTail = 4096;
constexpr double kJudgeGraceS = 30;  // beyond the candidate's deadline: reference timing, start-up

// How long the evaluator waits for a judge's reply: the candidate's deadline, the judge's own work,
// and the profile of an ok candidate when one is asked for ([eval] profile).
double judge_backstop_s(const SandboxConfig& s, bool profile) {
  return s.deadline_s + kJudgeGraceS + (profile ? kProfileBudgetS : 0);
}

}  // namespace

struct EvaluatorSlot::Process {
  ChildProcess child;
  int to_child = -1, from_child = -1, err = -1;
  FrameReader reader;
  bool ready = false;
  std::string stderr_tail;

  ~Process() {
    child.kill();
    close_fd(to_child);
    close_fd(from_child);
    close_fd(err);
  }

  // At its end the pipe is closed: poll would report it ready at once, every time.
  void drain_stderr() {
    if (!read_tail(err, stderr_tail, kStderrTail)) close_fd(err);
  }

  enum class Wait { frame, eof, deadline };
  // Waits for the next frame until `deadline`, draining stderr meanwhile.
  Wait next_frame(Clock::time_point deadline, std::optional<kj::Array<capnp::word>>* frame) {
    for (;;) {
      if ((*frame = reader.take())) return Wait::frame;
      double left = millis_until(deadline);
      if (left <= 0) return Wait::deadline;
      pollfd p[2] = {{from_child, POLLIN, 0}, {err, POLLIN, 0}};
      int n = ::poll(p, 2, static_cast<int>(std::min(left, 1000.0)) + 1);
      if (n < 0 && errno != EINTR) throw_errno("poll evaluator");
      if (p[1].revents) drain_stderr();
      if (p[0].revents && !reader.read_available(from_child)) {
        drain_stderr();
        return Wait::eof;
      }
    }
  }
};

EvaluatorSlot::EvaluatorSlot(std::string evald_path, Backend backend, SandboxConfig sandbox, EvalConfig eval,
                             std::shared_ptr<spdlog::logger> log, int device)
    : evald_path_(std::move(evald_path)),
      backend_(backend),
      sandbox_(sandbox),
      eval_(eval),
      log_(std::move(log)),
      device_(device) {
  current_ = spawn();
  for (int i = 0; i < sandbox_.spares; ++i) spares_.push_back(spawn());
}

EvaluatorSlot::~EvaluatorSlot() = default;

int EvaluatorSlot::pid() const { return current_ ? current_->child.pid() : -1; }

std::unique_ptr<EvaluatorSlot::Process> EvaluatorSlot::spawn() {
  auto p = std::make_unique<Process>();
  auto [req_r, req_w] = make_pipe();
  auto [rep_r, rep_w] = make_pipe();
  auto [err_r, err_w] = make_pipe();
  SpawnSpec spec;
  spec.argv = {evald_path_,
               "--backend", to_string(backend_),
               "--in", "3", "--out", "4",
               "--parent", std::to_string(::getpid()),
               "--device", std::to_string(device_),
               "--runner-spares", std::to_string(sandbox_.runner_spares),
               "--cuda-connections", std::to_string(sandbox_.cuda_connections)};
  if (backend_ == Backend::cpu) {
    // Slot i times on the i-th core this process may use: the reference and the candidate get the
    // same core, and processes given cores of their own (taskset, Slurm, bench --jobs) keep to them.
    const auto cores = usable_cores();
    spec.argv.insert(spec.argv.end(), {"--core", std::to_string(cores[static_cast<size_t>(device_) % cores.size()])});
  }
  if (!sandbox_.namespaces) spec.argv.push_back("--no-namespaces");
  if (!sandbox_.seccomp) spec.argv.push_back("--no-seccomp");
  if (!sandbox_.python_zygote) spec.argv.push_back("--no-python-zygote");
  spec.fds = {{req_r, 3}, {rep_w, 4}};
  spec.stderr_fd = err_w;
  // No LibTorch kernel cache on disk: the evaluator writes no files.
  spec.env = {"OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "USE_PYTORCH_KERNEL_CACHE=0"};
  p->child = launcher_.spawn(spec);
  ::close(req_r);
  ::close(rep_w);
  ::close(err_w);
  p->to_child = req_w;
  p->from_child = rep_r;
  p->err = err_r;
  ::fcntl(err_r, F_SETFL, O_NONBLOCK);
  log_->debug("started evaluator pid {}", p->child.pid());
  return p;
}

bool EvaluatorSlot::ensure_ready(std::string* why) {
  if (!current_) {
    if (spares_.empty()) spares_.push_back(spawn());
    current_ = std::move(spares_.front());
    spares_.pop_front();
    while (static_cast<int>(spares_.size()) < sandbox_.spares) spares_.push_back(spawn());
  }
  if (current_->ready) return true;
  std::optional<kj::Array<capnp::word>> frame;
  auto w = current_->next_frame(after_seconds(kStartTimeoutS), &frame);
  if (w != Process::Wait::frame) {
    *why = "evaluator failed to start (" + std::string(w == Process::Wait::eof ? "exited" : "no answer") +
           "): " + current_->stderr_tail;
    current_.reset();
    return false;
  }
  capnp::FlatArrayMessageReader reader(*frame);
  if (!reader.getRoot<proto::EvaldMessage>().isHello()) {
    *why = "evaluator spoke out of turn at start-up";
    current_.reset();
    return false;
  }
  current_->ready = true;
  return true;
}

void EvaluatorSlot::retire_current() {
  current_.reset();  // kills and reaps
  ++restarts_;
}

EvalOutcome EvaluatorSlot::evaluate(const EvalJob& job) {
  auto t0 = Clock::now();
  EvalOutcome o;
  o.id = job.id;
  o.task = job.task->name;
  o.candidate = job.candidate;
  o.backend = backend_;
  std::string why;
  if (!ensure_ready(&why) && !ensure_ready(&why)) {
    o.status = Status::infra_error;
    o.feedback = why;
    return o;
  }
  capnp::MallocMessageBuilder msg;
  auto req = msg.initRoot<proto::EvalRequest>();
  req.setId(job.id);
  to_proto(*job.task, backend_, req.initTask());
  req.setCandidateName(job.candidate);
  req.setLibraryPath(job.library_path);
  req.setFormat(job.format == CandidateFormat::kernelbench ? proto::CandidateFormat::KERNELBENCH : proto::CandidateFormat::LEAP_ABI);
  auto settings = req.initSettings();
  to_proto(job.settings ? *job.settings : eval_, settings);
  settings.setDeadlineS(sandbox_.deadline_s);
  settings.setMemoryMb(sandbox_.memory_mb);
  if (job.reference_timing) {
    req.setHasReferenceTiming(true);
    to_proto(*job.reference_timing, req.initReferenceTiming());
  }
  current_->stderr_tail.clear();
  try {
    write_frame(current_->to_child, msg);
  } catch (const LeapError& e) {
    retire_current();
    o.status = Status::infra_error;
    o.feedback = std::string("evaluator unreachable: ") + e.what();
    return o;
  }
  std::optional<kj::Array<capnp::word>> frame;
  Process::Wait w;
  const double backstop_s = judge_backstop_s(sandbox_, settings.getProfile());
  try {
    // The judge ends a slow candidate itself (timeout); this is the backstop for the judge.
    w = current_->next_frame(after_seconds(backstop_s), &frame);
  } catch (const LeapError& e) {
    retire_current();
    o.status = Status::infra_error;
    o.feedback = std::string("the judge's reply was corrupted: ") + e.what();
    return o;
  }
  if (w == Process::Wait::deadline) {
    retire_current();
    o.status = Status::infra_error;
    o.feedback = fmt::format("the judge did not answer within {:g} s; it was replaced", backstop_s);
  } else if (w == Process::Wait::eof) {
    std::string tail = current_->stderr_tail;
    int status = current_->child.wait();
    retire_current();
    o.status = Status::infra_error;  // candidates never run in the judge: its end is leap's fault
    o.feedback = "the judge ended during the evaluation (" + describe_wait_status(status) + ")";
    if (!tail.empty()) o.feedback += "; its last output:\n" + tail;
  } else {
    capnp::FlatArrayMessageReader reader(*frame);
    auto m = reader.getRoot<proto::EvaldMessage>();
    if (!m.isOutcome()) {
      retire_current();
      o.status = Status::infra_error;
      o.feedback = "the judge answered out of protocol";
    } else {
      o = from_proto(m.getOutcome());
      if (o.id != job.id) {
        o.status = Status::infra_error;
        o.feedback = "the judge answered for another request";
        o.recycle_evaluator = true;
      }
      if (o.recycle_evaluator) retire_current();
    }
  }
  o.stages.eval_us = micros_since(t0);  // as the worker sees it: request to reply
  return o;
}

}  // namespace leap
