// leap-evald: the judge. Started by a worker (never an MPI rank itself); reads EvalRequest
// frames on --in, answers EvaldMessage frames on --out. It holds the pristine inputs, computes
// the LibTorch reference, compares and writes the verdict; candidate code never runs here but
// in leap-runner processes it starts (sandboxed, one candidate each, pre-started spares).
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
#include <memory>
#include <filesystem>
#include <iostream>

#include "common/cores.h"
#include "common/error.h"
#include "common/framing.h"
#include "common/text.h"
#include "leap/candidate.h"
#include "proto/leap.capnp.h"
#include "worker/evald/evaluation.h"
#include "worker/evald/runner_pool.h"
#include "common/outcome_proto.h"

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

}  // namespace

int main(int argc, char** argv) {
  // The reference's temporaries (MBs at CPU sizes) stay in the heap once freed: with glibc's
  // adaptive thresholds they were mmapped or trimmed and faulted in again on every timed call or
  // not, by the process's allocation history, so the reference's time varied 3-4x between runs.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"leap-evald: the judge of candidate kernels (started by leap, not by hand)"};
  int fd_in = 3, fd_out = 4, parent = 0;
  std::string backend = "cpu";
  leap::RunnerOptions runners;
  bool no_namespaces = false, no_seccomp = false;
  app.add_option("--in", fd_in, "fd to read requests from");
  app.add_option("--out", fd_out, "fd to write replies to");
  app.add_option("--parent", parent, "pid of the worker; exit when it dies");
  app.add_option("--backend", backend)->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--device", runners.device, "GPU ordinal (cuda backend)");
  app.add_option("--core", runners.core, "CPU core of the judge's reference timing and the runners (cpu backend)");
  app.add_option("--runner", runners.runner_path, "leap-runner (default: beside leap-evald)");
  app.add_option("--runner-spares", runners.spares, "pre-started runners");
  app.add_option("--cuda-connections", runners.cuda_connections, "CUDA_DEVICE_MAX_CONNECTIONS of the runners (0: driver default)");
  app.add_option("--bwrap", runners.bwrap, "bubblewrap");
  app.add_flag("--no-namespaces", no_namespaces, "runners without bubblewrap (weaker; machines without user namespaces)");
  app.add_flag("--no-seccomp", no_seccomp, "runners without their seccomp filter (debugging only)");
  bool check_device = false;
  app.add_flag("--check-device", check_device, "only: exit 0 if the backend's device is usable, else say why and exit 1");
  CLI11_PARSE(app, argc, argv);
  if (check_device) {
    try {
      auto dev = backend == "cuda" ? leap::make_cuda_device(runners.device) : leap::make_cpu_device();
      std::cout << dev->name() << "\n";
      return 0;
    } catch (const std::exception& e) {
      std::cerr << e.what() << "\n";
      return 1;
    }
  }

  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent && ::getppid() != parent) return 1;  // the worker died before we armed PDEATHSIG
  std::signal(SIGPIPE, SIG_IGN);
  runners.cuda = backend == "cuda";
  runners.namespaces = !no_namespaces;
  runners.seccomp = !no_seccomp;
  if (runners.runner_path.empty()) runners.runner_path = self_dir() + "/leap-runner";
  if (runners.cuda) runners.core = -1;
  // A CUDA runner takes ~0.5-1.2 s to start (several at once) and a level-1 evaluation ~0.1 s:
  // enough spares to hide it.
  if (runners.spares <= 0) runners.spares = runners.cuda ? 12 : 2;
  runners.replace_after_use = !runners.cuda;
  // A CUDA context is made under the GPU lock (no judge times meanwhile): spares are started in
  // batches, or whenever the judge is idle. A CPU runner's replacement starts after each evaluation.
  runners.refill_below = runners.cuda ? std::max(1, runners.spares / 3) : runners.spares;
  try {
    // The reference is timed on the core (and thread count) the candidate gets.
    if (runners.core >= 0 && !leap::pin_to({runners.core})) runners.core = -1;
    at::set_num_threads(1);
    at::set_num_interop_threads(1);
    auto dev = runners.cuda ? leap::make_cuda_device(runners.device) : leap::make_cpu_device();
    auto warm = at::ones({64, 64}, at::TensorOptions().device(dev->torch_device()));
    (void)at::softmax(at::mm(warm, warm), -1).sum().item<float>();
    if (!dev->lock_id().empty()) runners.gpu_lock = leap::gpu_lock_path(dev->lock_id());
    leap::RunnerPool pool(runners);
    pool.prime();  // a runner that cannot start is reported by the evaluation that takes it
    {
      capnp::MallocMessageBuilder hello;
      auto h = hello.initRoot<leap::proto::EvaldMessage>().initHello();
      h.setPid(::getpid());
      h.setBackend(runners.cuda ? leap::proto::Backend::CUDA : leap::proto::Backend::CPU);
      h.setAbiVersion(LEAP_ABI_VERSION);
      leap::write_frame(fd_out, hello);
    }
    leap::ReferenceTimings reference_timings;
    leap::Workspace workspace(*dev);
    auto lock = runners.gpu_lock.empty() ? std::make_unique<leap::GpuLock>()
                                         : std::make_unique<leap::GpuLock>(runners.gpu_lock);
    while (auto frame = leap::read_frame(fd_in)) {
      capnp::FlatArrayMessageReader reader(*frame);
      auto req = reader.getRoot<leap::proto::EvalRequest>();
      leap::EvalOutcome o;
      try {
        o = leap::evaluate_request(req, *dev, pool, reference_timings, workspace, *lock);
      } catch (const std::exception& e) {
        o.id = req.getId();
        o.task = req.getTask().getName();
        o.candidate = req.getCandidateName();
        o.status = leap::Status::infra_error;
        o.feedback = std::string("judge error: ") + e.what();
        o.recycle_evaluator = true;
      }
      reply(fd_out, o);
      if (o.recycle_evaluator) ::_exit(0);  // leap's own fault: a fresh judge takes over
      leap::judge_idle(pool, *lock);
      // Spares start all at once only when no request came for a while: a request right behind
      // the reply would otherwise wait, at its timing, for the contexts being made.
      pollfd next{fd_in, POLLIN, 0};
      if (::poll(&next, 1, 25) == 0) pool.replenish();
    }
  } catch (const std::exception& e) {
    std::cerr << "leap-evald: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
