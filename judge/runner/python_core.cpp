// The Python runner's native part (libleap-pyrunner.so), loaded with ctypes by pyrunner.py: the
// same channel, trusted start, confinement and call timing as leap-runner (runner_core), behind a
// C interface the interpreter can call without Python's headers. Tensors go to the interpreter as
// DLPack capsules over the judge's own buffers (no copies). On CUDA it also loads and launches
// the answer's Triton kernels through the driver (what Triton's own C modules do, which it would
// compile with a C compiler the runner does not run).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "judge/runner/runner_core.h"

#ifdef LEAP_HAVE_CUDA
#include <cuda.h>
#include <dlfcn.h>
#endif

using namespace leap::runner;

namespace {

struct State {
  Options opts;
  std::unique_ptr<Backend> backend;
  Command layout;
  bool loaded = false;
  bool audit = false;  // the command being served is a correctness call
  char* arena = nullptr;
  double t_main = 0, lock_wait_us = 0;
  Reply pending;  // the reply of the command being served
};

// The zygote's own state (pyrunner.py --zygote): its runners by pid, SIGCHLD as a descriptor.
struct Zygote {
  pid_t pid = -1;
  int signals = -1;
  sigset_t mask{};  // the signal mask before SIGCHLD was blocked (its runners get it back)
  std::unordered_map<pid_t, uint64_t> tokens;
};

Zygote& zygote() {
  static Zygote z;
  return z;
}

void report(ZygoteEvent e, uint64_t token, int status, double elapsed_us) {
  ZygoteReport r;
  r.event = e;
  r.token = token;
  r.status = status;
  r.elapsed_us = elapsed_us;
  if (::send(kChannel, &r, sizeof r, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof r)) std::_Exit(4);
}

// Every runner that has ended, reaped and reported with its wait status.
void reap() {
  Zygote& z = zygote();
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    auto it = z.tokens.find(pid);
    if (it == z.tokens.end()) continue;
    report(ZygoteEvent::ended, it->second, status, 0);
    z.tokens.erase(it);
  }
}

State& state() {
  static State s;
  return s;
}

// A DLManagedTensor owning its shape: freed by its consumer (torch) through the deleter.
struct Managed {
  DLManagedTensor m{};
  std::vector<int64_t> shape;
};

#ifdef LEAP_HAVE_CUDA
// The driver's entry points Triton's kernels need, from the libcuda.so.1 the process already has
// (dlsym: the library loads on CPU machines, where there is no driver).
struct Driver {
  CUresult (*ctx_get_current)(CUcontext*) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*func_get_attribute)(int*, CUfunction_attribute, CUfunction) = nullptr;
  CUresult (*func_set_attribute)(CUfunction, CUfunction_attribute, int) = nullptr;
  CUresult (*func_set_cache_config)(CUfunction, CUfunc_cache) = nullptr;
  CUresult (*device_get_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*launch_kernel_ex)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
  bool ok = false;
};

const Driver& driver() {
  static Driver d = [] {
    Driver r;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return r;
    auto get = [h](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(h, name));
    };
    get(r.ctx_get_current, "cuCtxGetCurrent");
    get(r.module_load_data, "cuModuleLoadData");
    get(r.module_get_function, "cuModuleGetFunction");
    get(r.func_get_attribute, "cuFuncGetAttribute");
    get(r.func_set_attribute, "cuFuncSetAttribute");
    get(r.func_set_cache_config, "cuFuncSetCacheConfig");
    get(r.device_get_attribute, "cuDeviceGetAttribute");
    get(r.launch_kernel_ex, "cuLaunchKernelEx");
    get(r.get_error_string, "cuGetErrorString");
    r.ok = r.ctx_get_current && r.module_load_data && r.module_get_function && r.func_get_attribute &&
           r.func_set_attribute && r.func_set_cache_config && r.device_get_attribute && r.launch_kernel_ex &&
           r.get_error_string;
    return r;
  }();
  return d;
}

// 0, or the driver's error as text in `why` (size 256).
int cu_error(CUresult r, const char* what, char* why) {
  if (r == CUDA_SUCCESS) return 0;
  const char* text = nullptr;
  if (driver().get_error_string) driver().get_error_string(r, &text);
  snprintf(why, 256, "%s: %s (%d)", what, text ? text : "unknown CUDA error", static_cast<int>(r));
  return static_cast<int>(r);
}
#endif

}  // namespace

extern "C" {

// The trusted start: the runner's options, the GPU lock, the backend. Returns 0.
int leap_pyr_start(int argc, char** argv) {
  State& s = state();
  s.t_main = now_us();
  start_process();
  s.opts = parse(argc, argv);
  s.opts.blocking_stream = true;
  s.lock_wait_us = start_confined(s.opts);
  s.backend = std::make_unique<Backend>(s.opts.cuda, s.opts.device, s.opts.blocking_stream);
  pause_gpu_lock(s.opts);  // importing PyTorch (seconds of CPU) uses no device: a judge may time meanwhile
  return 0;
}

// The zygote's start: a runner's options (its runners inherit them) and a runner's process (killed
// with the judge, no new privileges, no core dumps, the judge's core), and not dumpable: its
// runners, which inherit that, run beside each other in its sandbox, and a process that is not
// dumpable cannot have its memory read or written by a sibling (no ptrace access without
// CAP_SYS_PTRACE, which the sandbox drops). No GPU lock and no CUDA here: a forked CUDA context is
// unusable, so each runner makes its own; the GPU lock's descriptors come with each fork request.
int leap_pyr_zygote_start(int argc, char** argv) {
  State& s = state();
  Zygote& z = zygote();
  s.t_main = now_us();
  start_process();
  ::prctl(PR_SET_DUMPABLE, 0);
  s.opts = parse(argc, argv);
  s.opts.blocking_stream = true;
  ::close_range(4, ~0u, 0);
  prepare(s.opts);
  z.pid = ::getpid();
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, &z.mask);
  z.signals = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (z.signals < 0) die("signalfd");
  return 0;
}

// Imports done: the judge may count on forks now.
void leap_pyr_zygote_ready() { report(ZygoteEvent::ready, 0, 0, now_us() - state().t_main); }

// The next fork request: its token and descriptors (up to 4: the runner's channel, its stderr, the
// GPU lock's gate and lock). Meanwhile runners that ended are reaped and reported, and kill
// requests done. Returns 0 at the channel's end (the judge is gone: so is the zygote).
int leap_pyr_zygote_next(uint64_t* token, int* fds, int* nfds) {
  Zygote& z = zygote();
  for (;;) {
    pollfd p[2] = {{kChannel, POLLIN, 0}, {z.signals, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      die("poll in the zygote");
    }
    if (p[1].revents) {
      signalfd_siginfo si;
      while (::read(z.signals, &si, sizeof si) > 0) {
      }
      reap();
    }
    if (!p[0].revents) continue;
    ZygoteRequest q;
    std::vector<int> got;
    ssize_t n = receive_with_fds(&q, sizeof q, got, 4);
    if (n <= 0) return 0;
    *nfds = 0;
    for (int fd : got)
      if (*nfds < 4) fds[(*nfds)++] = fd;
      else ::close(fd);
    if (n != static_cast<ssize_t>(sizeof q) || q.magic != kZygoteMagic) die("malformed zygote request");
    if (q.op == ZygoteOp::fork && (*nfds == 2 || *nfds == 4)) {
      *token = q.token;
      return 1;
    }
    for (int i = 0; i < *nfds; ++i) ::close(fds[i]);
    if (q.op != ZygoteOp::kill) die("malformed zygote request");
    for (const auto& [pid, t] : z.tokens)
      if (t == q.token) ::kill(pid, SIGKILL);
  }
}

// In the zygote after its fork: the runner's pid noted (its end is reported), its descriptors closed.
void leap_pyr_zygote_forked(uint64_t token, int pid, const int* fds, int nfds) {
  if (pid > 0) zygote().tokens[pid] = token;
  for (int i = 0; i < nfds; ++i) ::close(fds[i]);
}

// In a runner just forked: killed with the zygote, the zygote's signal mask, its own descriptors at
// a runner's numbers (channel 3, stderr 2, the GPU lock 5 and 6) and no other; then a runner's start
// (the GPU lock's hold, the backend: a CUDA context of its own).
void leap_pyr_child(const int* fds, int nfds) {
  State& s = state();
  Zygote& z = zygote();
  s.t_main = now_us();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // fork cleared it
  if (::getppid() != z.pid) std::_Exit(3);
  ::close(z.signals);
  ::sigprocmask(SIG_SETMASK, &z.mask, nullptr);
  // Above every number they go to first: a received descriptor may sit at another's target.
  int high[4];
  for (int i = 0; i < nfds; ++i) {
    high[i] = ::fcntl(fds[i], F_DUPFD_CLOEXEC, 64);
    if (high[i] < 0) die("fcntl in a forked runner");
  }
  const int target[4] = {kChannel, 2, kGpuGate, kGpuLock};
  for (int i = 0; i < nfds; ++i)
    if (::dup2(high[i], target[i]) < 0) die("dup2 in a forked runner");
  if (s.opts.gpu_lock != (nfds == 4)) die("a fork request without the GPU lock's descriptors");
  ::close_range(s.opts.gpu_lock ? 7 : 4, ~0u, 0);
  if (s.opts.gpu_lock) ::close_range(4, 4, 0);
  s.lock_wait_us = hold_gpu_lock(s.opts);
  s.backend = std::make_unique<Backend>(s.opts.cuda, s.opts.device, s.opts.blocking_stream);
  pause_gpu_lock(s.opts);
}

// Around the interpreter's device work before ready (PyTorch's and Triton's warm-ups): the hold
// again, and paused for CPU work between (Triton's compile of its warm-up kernel).
void leap_pyr_hold_gpu() {
  State& s = state();
  s.lock_wait_us += hold_gpu_lock(s.opts);
}

void leap_pyr_pause_gpu() { pause_gpu_lock(state().opts); }

// Once the interpreter has imported what candidates use: the ready reply, with its start.
void leap_pyr_ready() {
  State& s = state();
  release_gpu_lock(s.opts);
  Reply ready;
  ready.elapsed_us = now_us() - s.t_main;
  ready.lock_wait_us = s.lock_wait_us;
  send_reply(ready);
}

// The next command: its op (0 at the channel's end), sequence number and slot; descriptors (load
// only) into fds.
int leap_pyr_receive(uint64_t* seq, uint32_t* slot, int* fds, int max_fds, int* nfds) {
  State& s = state();
  Command c;
  std::vector<int> got;
  *nfds = 0;
  if (s.loaded ? !receive_plain(c) : !receive(c, got, max_fds)) return 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (static_cast<int>(i) < max_fds) fds[(*nfds)++] = got[i];
    else ::close(got[i]);
  }
  *seq = c.seq;
  *slot = c.slot;
  s.audit = c.op == Op::call && c.audit != 0;
  s.pending = Reply{};
  s.pending.seq = c.seq;
  s.pending.kind = ReplyKind::called;
  if (c.op == Op::load) {
    if (s.loaded || c.n_in + c.n_out > static_cast<uint32_t>(kMaxTensors)) die("malformed load");
    s.layout = c;
  } else if (c.op == Op::call && (!s.loaded || c.slot >= s.layout.slots)) {
    die("command out of order");
  } else if (c.op == Op::calibrate && s.loaded) {
    die("command out of order");
  }
  return static_cast<int>(c.op);
}

void leap_pyr_calibrate() {
  State& s = state();
  s.backend->calibrate(s.pending);
  send_reply(s.pending);
}

// `load`, trusted part: the judge's buffers mapped, then this process confined (the candidate's
// source runs after this returns). Returns the mapping's time in microseconds.
double leap_pyr_map_and_confine(int arena_fd) {
  State& s = state();
  const double t0 = now_us();
  s.arena = s.backend->map_arena(s.layout, arena_fd);
  confine(s.layout, s.opts.cuda, s.opts);
  s.loaded = true;
  return now_us() - t0;
}

void leap_pyr_layout(int* n_in, int* n_out) {
  *n_in = static_cast<int>(state().layout.n_in);
  *n_out = static_cast<int>(state().layout.n_out);
}

// Tensor i of `slot` as a DLManagedTensor for DLPack's capsule (its consumer frees it).
void* leap_pyr_view(uint32_t slot, int i) {
  State& s = state();
  std::vector<std::vector<int64_t>> dims;
  std::vector<DLTensor> views = slot_views(s.layout, s.arena, slot, s.opts.cuda, dims);
  auto* t = new Managed;
  t->shape = dims.at(static_cast<size_t>(i));
  t->m.dl_tensor = views[static_cast<size_t>(i)];
  t->m.dl_tensor.shape = t->shape.data();
  t->m.manager_ctx = t;
  t->m.deleter = [](DLManagedTensor* m) { delete static_cast<Managed*>(m->manager_ctx); };
  return &t->m;
}

int leap_pyr_audit() { return state().audit ? 1 : 0; }

void* leap_pyr_stream() { return state().backend->stream(); }

void leap_pyr_begin() { state().backend->begin(); }

// The call's end: its timing and the reply; `message` from an exception the call raised.
void leap_pyr_end(int rc, const char* message) {
  State& s = state();
  s.backend->end(s.pending, rc);
  if (message && *message && s.pending.message[0] == 0) set_message(s.pending, message);
  send_reply(s.pending);
}

// The load's reply: loaded, or failed with why.
void leap_pyr_loaded(int ok, const char* message, double map_us, double library_us) {
  State& s = state();
  s.pending.kind = ok ? ReplyKind::loaded : ReplyKind::failed;
  s.pending.map_us = map_us;
  s.pending.library_us = library_us;
  if (message) set_message(s.pending, message);
  send_reply(s.pending);
}

// Triton's kernels on CUDA: a compiled image (cubin, or PTX the driver compiles) loaded into the
// current context; out = {module, function}, ints = {registers, spilled words, max threads}.
// Returns 0 or the driver's error, with why (256 bytes).
int leap_pyr_cu_load(const char* name, const void* image, int shared, int device, uint64_t* out, int* ints, char* why) {
#ifdef LEAP_HAVE_CUDA
  const Driver& d = driver();
  if (!d.ok) return snprintf(why, 256, "the CUDA driver library is not loaded"), -1;
  CUcontext ctx = nullptr;
  if (int e = cu_error(d.ctx_get_current(&ctx), "cuCtxGetCurrent", why)) return e;
  if (!ctx) return snprintf(why, 256, "no CUDA context is current"), -1;
  CUmodule mod;
  CUfunction fn;
  if (int e = cu_error(d.module_load_data(&mod, image), "cuModuleLoadData", why)) return e;
  if (int e = cu_error(d.module_get_function(&fn, mod, name), "cuModuleGetFunction", why)) return e;
  int regs = 0, local = 0, threads = 0, optin = 0;
  if (int e = cu_error(d.func_get_attribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn), "cuFuncGetAttribute", why))
    return e;
  if (int e = cu_error(d.func_get_attribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn), "cuFuncGetAttribute", why))
    return e;
  if (int e = cu_error(d.func_get_attribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn),
                       "cuFuncGetAttribute", why))
    return e;
  if (int e = cu_error(d.device_get_attribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device),
                       "cuDeviceGetAttribute", why))
    return e;
  // Past 48 KiB a kernel's dynamic shared memory must be opted into (as Triton's loader does).
  if (shared > 49152 && optin > 49152) {
    int fixed = 0;
    if (int e = cu_error(d.func_set_cache_config(fn, CU_FUNC_CACHE_PREFER_SHARED), "cuFuncSetCacheConfig", why))
      return e;
    if (int e =
            cu_error(d.func_get_attribute(&fixed, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn), "cuFuncGetAttribute", why))
      return e;
    if (int e = cu_error(d.func_set_attribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - fixed),
                         "cuFuncSetAttribute", why))
      return e;
  }
  out[0] = reinterpret_cast<uint64_t>(mod);
  out[1] = reinterpret_cast<uint64_t>(fn);
  ints[0] = regs;
  ints[1] = local / 4;
  ints[2] = threads;
  return 0;
#else
  (void)name, (void)image, (void)shared, (void)device, (void)out, (void)ints;
  return snprintf(why, 256, "leap was built without CUDA"), -1;
#endif
}

// A device attribute (CUdevice_attribute's value); -1 when the driver cannot say.
int leap_pyr_cu_attribute(int attribute, int device) {
#ifdef LEAP_HAVE_CUDA
  int v = -1;
  if (!driver().ok ||
      driver().device_get_attribute(&v, static_cast<CUdevice_attribute>(attribute), device) != CUDA_SUCCESS)
    return -1;
  return v;
#else
  (void)attribute, (void)device;
  return -1;
#endif
}

// One launch of a Triton kernel: Triton's own launcher's configuration (grid x num_ctas, 32 x
// num_warps threads, its dynamic shared memory, cooperative / programmatic-dependent launch and
// cluster attributes) with `params` its kernel parameters. Returns 0 or the driver's error.
int leap_pyr_cu_launch(uint64_t function, uint64_t stream, int grid_x, int grid_y, int grid_z, int num_warps,
                       int num_ctas, int shared, int cooperative, int pdl, void** params, char* why) {
#ifdef LEAP_HAVE_CUDA
  const Driver& d = driver();
  if (!d.ok) return snprintf(why, 256, "the CUDA driver library is not loaded"), -1;
  if (static_cast<int64_t>(grid_x) * grid_y * grid_z <= 0) return 0;
  auto fn = reinterpret_cast<CUfunction>(function);
  CUlaunchAttribute attrs[4];
  unsigned n = 0;
  if (pdl) {
    attrs[n] = {};
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n++].value.programmaticStreamSerializationAllowed = 1;
  }
  if (cooperative) {
    attrs[n] = {};
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n++].value.cooperative = 1;
  }
  if (num_ctas != 1) {
    attrs[n] = {};
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = static_cast<unsigned>(num_ctas);
    attrs[n].value.clusterDim.y = 1;
    attrs[n++].value.clusterDim.z = 1;
    attrs[n] = {};
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
    attrs[n++].value.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
    if (num_ctas == 16) {
      if (int e = cu_error(d.func_set_attribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                           "cuFuncSetAttribute", why))
        return e;
    }
  }
  CUlaunchConfig config{};
  config.gridDimX = static_cast<unsigned>(grid_x * num_ctas);
  config.gridDimY = static_cast<unsigned>(grid_y);
  config.gridDimZ = static_cast<unsigned>(grid_z);
  config.blockDimX = static_cast<unsigned>(32 * num_warps);
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = static_cast<unsigned>(shared);
  config.hStream = reinterpret_cast<CUstream>(stream);
  config.attrs = attrs;
  config.numAttrs = n;
  return cu_error(d.launch_kernel_ex(&config, fn, params, nullptr), "cuLaunchKernelEx", why);
#else
  (void)function, (void)stream, (void)grid_x, (void)grid_y, (void)grid_z, (void)num_warps, (void)num_ctas, (void)shared,
      (void)cooperative, (void)pdl, (void)params;
  return snprintf(why, 256, "leap was built without CUDA"), -1;
#endif
}

}  // extern "C"
