// leap-runner: the disposable process in which one candidate runs. Started by the judge
// (leap-evald) inside bubblewrap (own user/pid/net/ipc/uts/mount namespaces, read-only minimal
// filesystem, empty environment); serves exactly one candidate and is then killed.
//
// Trusted phase (before `load`): initialise the backend, answer calibration calls. On `load`:
// map the judge's buffers, lower the memory limit, install the allow-list seccomp filter, and
// only then dlopen the candidate (its constructors already run confined). From then on this
// process is the candidate's: whatever it reports is untrusted data the judge cross-checks.
// It holds no descriptor but its channel (fd 3), stdin (/dev/null) and stderr.

#include "judge/runner/runner_process.h"

#include <dlfcn.h>
#include <unistd.h>

#include <exception>
#include <string>
#include <vector>

#include "judge/runner/runner_core.h"

namespace {

using namespace leap::runner;
using KernelFn = int (*)(const DLTensor*, int, DLTensor*, int, void*);

struct Candidate {
  KernelFn fn = nullptr;
  char* arena = nullptr;
  Command layout;

  int call(uint32_t slot, const Backend& backend, std::string* what) {
    std::vector<std::vector<int64_t>> dims;
    std::vector<DLTensor> views = slot_views(layout, arena, slot, backend.cuda(), dims);
    try {
      return fn(views.data(), static_cast<int>(layout.n_in), views.data() + layout.n_in, static_cast<int>(layout.n_out),
                backend.stream());
    } catch (const std::exception& e) {
      *what = e.what();
    } catch (...) {
      *what = "unknown exception";
    }
    return kEscapedException;
  }
};

// `load`: map the judge's buffers, confine this process, and only then dlopen the candidate.
// Fills the reply; false when the candidate cannot be called.
bool load(Candidate& cand, Backend& backend, const Command& c, const std::vector<int>& fds, const Options& opts,
          Reply& r) {
  if (fds.empty() || c.n_in + c.n_out > static_cast<uint32_t>(kMaxTensors)) die("malformed load");
  cand.layout = c;
  double t0 = now_us();
  cand.arena = backend.map_arena(c, fds.size() > 1 ? fds[1] : -1);
  std::string lib = "/proc/self/fd/" + std::to_string(fds[0]);
  confine(c, opts.cuda, opts);
  double t1 = now_us();
  void* h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  r.map_us = t1 - t0;
  r.library_us = now_us() - t1;
  if (!h) {
    r.kind = ReplyKind::failed;
    set_message(r, std::string("cannot load the candidate: ") + ::dlerror());
  } else if (!(cand.fn = reinterpret_cast<KernelFn>(::dlsym(h, "leap_kernel")))) {
    r.kind = ReplyKind::failed;
    set_message(r, "the candidate does not export leap_kernel");
  } else {
    r.kind = ReplyKind::loaded;
  }
  ::close(fds[0]);
  return r.kind == ReplyKind::loaded;
}

}  // namespace

int leap::runner_process_main(int argc, char** argv) {
  const double t_main = now_us();
  start_process();
  Options opts = parse(argc, argv);
  const double lock_wait_us = start_confined(opts);
  Backend backend(opts.cuda, opts.device);
  release_gpu_lock(opts);
  Reply ready;  // its start, for the judge's diagnostics
  ready.elapsed_us = now_us() - t_main;
  ready.lock_wait_us = lock_wait_us;
  send_reply(ready);
  Candidate cand;
  Command c;
  std::vector<int> fds;
  while (true) {
    fds.clear();
    if (cand.fn) {
      if (!receive_plain(c)) return 0;  // no descriptors accepted once loaded
    } else if (!receive(c, fds)) {
      return 0;
    }
    Reply r;
    r.seq = c.seq;
    r.kind = ReplyKind::called;
    if (c.op == Op::calibrate && !cand.fn) {
      backend.calibrate(r);
    } else if (c.op == Op::load && !cand.fn) {
      const bool loaded = load(cand, backend, c, fds, opts, r);
      send_reply(r);
      if (!loaded) return 0;
      continue;
    } else if (c.op == Op::call && cand.fn && c.slot < cand.layout.slots) {
      std::string what;
      backend.measure(r, [&] { return cand.call(c.slot, backend, &what); });
      if (!what.empty()) set_message(r, what);
    } else {
      die("command out of order");
    }
    send_reply(r);
  }
}
