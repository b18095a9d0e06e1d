// leap-evald: the judge. Started by a worker (never an MPI rank itself); reads EvalRequest
// frames on --in, answers EvaldMessage frames on --out. It holds the pristine inputs, computes
// the LibTorch reference, compares and writes the verdict; candidate code never runs here but
// in leap-runner processes it starts (sandboxed, one candidate each, pre-started spares).

#include "judge/judge_process.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>

#include "common/config.h"
#include "common/cores.h"
#include "common/error.h"
#include "common/framing.h"
#include "common/outcome_proto.h"
#include "common/python.h"
#include "common/text.h"
#include "judge/evaluation.h"
#include "judge/pool/runner_pool.h"
#include "leap/candidate.h"
#include "proto/leap.capnp.h"

namespace {

void reply(int fd, leap::EvalOutcome o) {
  o.feedback = leap::clean_text(o.feedback, 64 << 10);  // the worker cuts it to [eval] max_feedback_bytes
  capnp::MallocMessageBuilder msg;
  leap::to_proto(o, msg.initRoot<leap::proto::EvaldMessage>().initOutcome());
  leap::write_frame(fd, msg);
}

std::string self_dir() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).parent_path().string();
}

// How the worker started this judge (its command line).
struct JudgeArgs {
  int fd_in = 3, fd_out = 4, parent = 0;
  std::string backend = "cpu";
  leap::RunnerOptions runners;
  std::string python;  // the Python runners' interpreter ("": the first of python3, /usr/bin/python3 with PyTorch)
  bool no_namespaces = false, no_seccomp = false, no_python_zygote = false, check_device = false;
};

void add_options(CLI::App& app, JudgeArgs& a) {
  app.add_option("--in", a.fd_in, "fd to read requests from");
  app.add_option("--out", a.fd_out, "fd to write replies to");
  app.add_option("--parent", a.parent, "pid of the worker; exit when it dies");
  app.add_option("--backend", a.backend)->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--device", a.runners.device, "GPU ordinal (cuda backend)");
  app.add_option("--core", a.runners.core, "CPU core of the judge's reference timing and the runners (cpu backend)");
  app.add_option("--runner", a.runners.runner_path, "leap-runner (default: beside leap-evald)");
  app.add_option("--runner-spares", a.runners.spares, "pre-started runners");
  app.add_option("--python", a.python, "the interpreter of KernelBench-format candidates' runners (with PyTorch)");
  app.add_option("--cuda-connections", a.runners.cuda_connections,
                 "CUDA_DEVICE_MAX_CONNECTIONS of the runners (0: driver default)");
  app.add_option("--bwrap", a.runners.bwrap, "bubblewrap");
  app.add_flag("--no-namespaces", a.no_namespaces,
               "runners without bubblewrap (weaker; machines without user namespaces)");
  app.add_flag("--no-seccomp", a.no_seccomp, "runners without their seccomp filter (debugging only)");
  app.add_flag("--no-python-zygote", a.no_python_zygote,
               "each Python runner imports PyTorch itself (instead of forking from one interpreter that has)");
  app.add_flag("--check-device", a.check_device,
               "only: exit 0 if the backend's device is usable, else say why and exit 1");
}

// The runner pool's settings for this backend.
leap::RunnerOptions runner_options(const JudgeArgs& a) {
  leap::RunnerOptions r = a.runners;
  r.cuda = a.backend == "cuda";
  r.namespaces = !a.no_namespaces;
  r.seccomp = !a.no_seccomp;
  r.zygote = !a.no_python_zygote;
  if (r.runner_path.empty()) r.runner_path = self_dir() + "/leap-runner";
  if (r.cuda) r.core = -1;
  if (r.spares <= 0) r.spares = leap::runner_spares(leap::SandboxConfig{}, r.cuda);  // a judge started by hand
  r.replace_after_use = !r.cuda;
  // A CUDA context is made under the GPU lock (no judge times meanwhile): spares are started in
  // batches, or whenever the judge is idle. A CPU runner's replacement starts after each evaluation.
  r.refill_below = r.cuda ? std::max(1, r.spares / 3) : r.spares;
  return r;
}

// Requests until the worker closes the channel, each answered; a failure of the judge's own is
// infra_error and ends this judge (a fresh one takes over).
void serve(const JudgeArgs& a, leap::RunnerOptions& runners) {
  // The reference is timed on the core (and thread count) the candidate gets.
  if (runners.core >= 0 && !leap::pin_to({runners.core})) runners.core = -1;
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
  auto dev = runners.cuda ? leap::make_cuda_device(runners.device) : leap::make_cpu_device();
  auto warm = at::ones({64, 64}, at::TensorOptions().device(dev->torch_device()));
  (void)at::softmax(at::mm(warm, warm), -1).sum().item<float>();
  if (!dev->lock_id().empty()) runners.gpu_lock = leap::gpu_lock_path(dev->lock_id());
  runners.capability = dev->compute_capability();
  leap::RunnerPool pool(runners);
  pool.prime();  // a runner that cannot start is reported by the evaluation that takes it
  // Python runners (KernelBench-format candidates): started with the first such candidate.
  std::unique_ptr<leap::RunnerPool> python_pool;
  auto pool_for = [&](leap::proto::EvalRequest::Reader req) -> leap::RunnerPool& {
    if (req.getFormat() != leap::proto::CandidateFormat::KERNELBENCH) return pool;
    if (!python_pool) {
      leap::RunnerOptions o = runners;
      o.python = leap::python_with_torch(a.python);
      python_pool = std::make_unique<leap::RunnerPool>(o);
      // On the GPU the first evaluation takes the first spare ready (a spare imports PyTorch
      // without the GPU lock, seconds of CPU) instead of waiting for the whole pool's. On the CPU
      // nothing starts beside a timing: all of them first.
      if (!dev->is_gpu()) python_pool->prime();
    }
    return *python_pool;
  };
  {
    capnp::MallocMessageBuilder hello;
    auto h = hello.initRoot<leap::proto::EvaldMessage>().initHello();
    h.setPid(::getpid());
    h.setBackend(runners.cuda ? leap::proto::Backend::CUDA : leap::proto::Backend::CPU);
    h.setAbiVersion(LEAP_ABI_VERSION);
    leap::write_frame(a.fd_out, hello);
  }
  leap::ReferenceTimings reference_timings;
  leap::Workspace workspace(*dev);
  auto lock =
      runners.gpu_lock.empty() ? std::make_unique<leap::GpuLock>() : std::make_unique<leap::GpuLock>(runners.gpu_lock);
  while (auto frame = leap::read_frame(a.fd_in)) {
    capnp::FlatArrayMessageReader reader(*frame);
    auto req = reader.getRoot<leap::proto::EvalRequest>();
    leap::EvalOutcome o;
    leap::RunnerPool* used = &pool;
    try {
      leap::RunnerPool& runners_of = pool_for(req);
      used = &runners_of;
      // The other kind's last runner is gone too before anything is sized or timed.
      leap::RunnerPool* other = &runners_of == &pool ? python_pool.get() : &pool;
      if (other && !other->wait_idle(30))
        throw leap::LeapError("the previous candidate's runner was still alive 30 s after it was killed (" +
                              other->lingering() + ")");
      // On the CPU nothing is starting while a candidate is timed: the other kind's spares too (a
      // Python runner's start, seconds of CPU, made honest C++ candidates look forged beside it).
      if (other && !dev->is_gpu()) other->settle(60);
      o = leap::evaluate_request(req, *dev, runners_of, reference_timings, workspace, *lock);
    } catch (const std::exception& e) {
      o.id = req.getId();
      o.task = req.getTask().getName();
      o.candidate = req.getCandidateName();
      o.status = leap::Status::infra_error;
      o.feedback = std::string("judge error: ") + e.what();
      o.recycle_evaluator = true;
    }
    reply(a.fd_out, o);
    if (o.recycle_evaluator) ::_exit(0);  // leap's own fault: a fresh judge takes over
    leap::judge_idle(*used, *lock);
    // Spares start all at once only when no request came for a while: a request right behind
    // the reply would otherwise wait, at its timing, for the contexts being made.
    pollfd next{a.fd_in, POLLIN, 0};
    if (::poll(&next, 1, 25) == 0) pool.replenish();
  }
}

}  // namespace

int leap::judge_process_main(int argc, char** argv) {
  // The reference's temporaries (MBs at CPU sizes) stay in the heap once freed: with glibc's
  // adaptive thresholds they were mmapped or trimmed and faulted in again on every timed call or
  // not, by the process's allocation history, so the reference's time varied 3-4x between runs.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"leap-evald: the judge of candidate kernels (started by leap, not by hand)"};
  JudgeArgs a;
  add_options(app, a);
  CLI11_PARSE(app, argc, argv);
  if (a.check_device) {
    try {
      auto dev = a.backend == "cuda" ? leap::make_cuda_device(a.runners.device) : leap::make_cpu_device();
      std::cout << dev->name() << "\n";
      return 0;
    } catch (const std::exception& e) {
      std::cerr << e.what() << "\n";
      return 1;
    }
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (a.parent && ::getppid() != a.parent) return 1;  // the worker died before we armed PDEATHSIG
  // Bare runners (no namespaces) see this process in /proc under the same user: not dumpable, its
  // memory (pristine inputs, references) opens to no process without CAP_SYS_PTRACE, and a runner
  // drops every capability before candidate code runs.
  if (a.no_namespaces) ::prctl(PR_SET_DUMPABLE, 0);
  std::signal(SIGPIPE, SIG_IGN);
  leap::RunnerOptions runners = runner_options(a);
  try {
    serve(a, runners);
  } catch (const std::exception& e) {
    std::cerr << "leap-evald: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
