// leap-evald: the sandboxed evaluator. Started by a worker (never an MPI rank itself); reads
// EvalRequest frames on --in, answers EvaldMessage frames on --out. Candidate code is loaded
// only here; a crash, hang or stray thread costs this process, never the caller.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>

#include "common/error.h"
#include "leap/candidate.h"
#include "common/framing.h"
#include "proto/leap.capnp.h"
#include "worker/evald/evaluation.h"
#include "worker/evald/sandbox.h"
#include "worker/outcome_proto.h"

namespace {

void reply(int fd, const leap::EvalOutcome& o) {
  capnp::MallocMessageBuilder msg;
  leap::to_proto(o, msg.initRoot<leap::proto::EvaldMessage>().initOutcome());
  leap::write_frame(fd, msg);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"leap-evald: sandboxed candidate evaluator (started by leap, not by hand)"};
  int fd_in = 3, fd_out = 4, parent = 0, device = 0;
  std::string backend = "cpu";
  leap::SandboxLimits limits;
  bool seccomp = true;
  app.add_option("--in", fd_in, "fd to read requests from");
  app.add_option("--out", fd_out, "fd to write replies to");
  app.add_option("--parent", parent, "pid of the worker; exit when it dies");
  app.add_option("--backend", backend)->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--device", device, "GPU ordinal (cuda backend)");
  app.add_option("--cpu-limit-s", limits.cpu_limit_s);
  app.add_option("--memory-mb", limits.memory_mb);
  app.add_option("--file-size-bytes", limits.file_size_bytes);
  app.add_flag("!--no-seccomp", seccomp, "run without the seccomp filter (debugging only)");
  CLI11_PARSE(app, argc, argv);

  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent && ::getppid() != parent) return 1;  // the worker died before we armed PDEATHSIG
  std::signal(SIGPIPE, SIG_IGN);
  try {
    leap::apply_limits(limits);
    at::set_num_threads(1);  // on CPU the reference is timed single-threaded, as the candidate
    at::set_num_interop_threads(1);
    auto dev = backend == "cuda" ? leap::make_cuda_device(device) : leap::make_cpu_device();
    // Initialise ATen (and on the GPU its kernels and cuBLAS) before the sandbox closes.
    auto warm = at::ones({64, 64}, at::TensorOptions().device(dev->torch_device()));
    (void)at::softmax(at::mm(warm, warm), -1).sum().item<float>();
    if (seccomp) leap::install_seccomp_filter();

    {
      capnp::MallocMessageBuilder hello;
      auto h = hello.initRoot<leap::proto::EvaldMessage>().initHello();
      h.setPid(::getpid());
      h.setBackend(backend == "cuda" ? leap::proto::Backend::CUDA : leap::proto::Backend::CPU);
      h.setAbiVersion(LEAP_ABI_VERSION);
      leap::write_frame(fd_out, hello);
    }
    leap::ReferenceTimings reference_timings;
    while (auto frame = leap::read_frame(fd_in)) {
      capnp::FlatArrayMessageReader reader(*frame);
      auto req = reader.getRoot<leap::proto::EvalRequest>();
      leap::EvalOutcome o;
      try {
        o = leap::evaluate_request(req, *dev, reference_timings);
      } catch (const std::exception& e) {
        o.id = req.getId();
        o.task = req.getTask().getName();
        o.candidate = req.getCandidateName();
        o.status = leap::Status::infra_error;
        o.feedback = std::string("evaluator error: ") + e.what();
        o.recycle_evaluator = true;
      }
      reply(fd_out, o);
      // Tainted (stray candidate threads, a faulted GPU): exit at once, running no destructor
      // that could touch what the candidate left behind. The worker starts a replacement.
      if (o.recycle_evaluator) ::_exit(0);
    }
  } catch (const std::exception& e) {
    std::cerr << "leap-evald: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
