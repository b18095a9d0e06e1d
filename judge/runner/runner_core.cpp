#include "judge/runner/runner_core.h"

#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "common/cores.h"
#include "sandbox/seccomp.h"

#ifdef LEAP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace leap::runner {

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "leap-runner: %s\n", why.c_str());
  std::_Exit(3);
}

double now_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

void send_reply(Reply r) {
  r.magic = kMagic;
  if (::send(kChannel, &r, sizeof r, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof r)) std::_Exit(4);
}

void set_message(Reply& r, const std::string& m) { std::snprintf(r.message, sizeof r.message, "%s", m.c_str()); }

ssize_t receive_with_fds(void* data, size_t n, std::vector<int>& fds, int max_fds) {
  iovec io{data, n};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(8 * sizeof(int))];
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctrl;
  m.msg_controllen = CMSG_SPACE(static_cast<size_t>(std::min(max_fds, 8)) * sizeof(int));
  ssize_t got;
  while ((got = ::recvmsg(kChannel, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  for (cmsghdr* h = got > 0 ? CMSG_FIRSTHDR(&m) : nullptr; h; h = CMSG_NXTHDR(&m, h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
      fds.push_back(fd);
    }
  }
  return got;
}

bool receive(Command& c, std::vector<int>& fds, int max_fds) {
  ssize_t n = receive_with_fds(&c, sizeof c, fds, max_fds);
  if (n == 0) return false;
  if (n != static_cast<ssize_t>(sizeof c) || c.magic != kMagic) die("malformed command");
  return true;
}

bool receive_plain(Command& c) {
  ssize_t n = ::read(kChannel, &c, sizeof c);
  if (n == 0) return false;
  if (n != static_cast<ssize_t>(sizeof c) || c.magic != kMagic) die("malformed command");
  return true;
}

// Bytes of the process's address space (VmSize) or of its private writable memory (VmData).
static rlim_t vm_bytes(const char* field) {
  unsigned long kb = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    size_t n = std::strlen(field);
    while (std::fgets(line, sizeof line, f))
      if (std::strncmp(line, field, n) == 0 && line[n] == ':') kb = std::strtoul(line + n + 1, nullptr, 10);
    std::fclose(f);
  }
  return static_cast<rlim_t>(kb) << 10;
}

void confine(const Command& c, bool cuda, const Options& opts) {
  if (c.memory_limit_bytes > 0) {
    // CPU: the address space, so every mapping counts. GPU: the CUDA driver reserves terabytes
    // of address space, so the data limit (private writable memory: malloc, private mappings);
    // the seccomp filter refuses the shared anonymous mappings it does not count.
    rlimit rl{};
    rl.rlim_cur = rl.rlim_max = vm_bytes(cuda ? "VmData" : "VmSize") + c.memory_limit_bytes;
    if (::setrlimit(cuda ? RLIMIT_DATA : RLIMIT_AS, &rl) != 0) die("setrlimit");
  }
  // No capability reaches candidate code. In bubblewrap there are none already; a bare runner
  // ([sandbox] namespaces = false) started by root would keep them all, CAP_SYS_PTRACE among them,
  // which opens the judge's /proc/PID/mem (its pristine inputs and references) whatever it does.
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capset, &header, none) != 0) die("capset");
  // The policy was read at the start (start_confined): nothing here allocates for it.
  if (opts.seccomp) leap::sandbox::install_candidate_filter(leap::sandbox::policy(), cuda, opts.seccomp_debug);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--backend") o.cuda = next() == "cuda";
    else if (a == "--device") o.device = std::atoi(next().c_str());
    else if (a == "--core") o.core = std::atoi(next().c_str());
    else if (a == "--capability") (void)next();  // the Python runner's (Triton's target)
    else if (a == "--cuda-connections") o.cuda_connections = std::atoi(next().c_str());
    else if (a == "--gpu-lock") o.gpu_lock = true;
    else if (a == "--no-seccomp") o.seccomp = false;
    else if (a == "--seccomp-debug") o.seccomp_debug = true;
    else die("unknown argument " + a);
  }
  return o;
}

double start_confined(const Options& opts) {
  // Nothing but the channel and the standard streams (and the GPU lock, until the context exists).
  ::close_range(opts.gpu_lock ? 7 : 4, ~0u, 0);
  if (opts.gpu_lock) ::close_range(4, 4, 0);
  prepare(opts);
  return hold_gpu_lock(opts);
}

void prepare(const Options& opts) {
  // The sandbox policy, read now (a spare's start, not a candidate's load): its filter is built
  // from it once a candidate comes.
  try {
    if (opts.seccomp) leap::sandbox::policy();
  } catch (const std::exception& e) {
    die(e.what());
  }
  rlimit none{0, 0};
  ::setrlimit(RLIMIT_CORE, &none);                // a crash dumps nothing
  ::setrlimit(RLIMIT_FSIZE, &none);               // and no file grows
  if (opts.core >= 0) leap::pin_to({opts.core});  // the core the judge times the reference on
  // Read when the context is created: each hardware queue is a channel the driver sets up and
  // tears down with the context, the bulk of a runner's start and exit.
  if (opts.cuda && opts.cuda_connections > 0)
    ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(opts.cuda_connections).c_str(), 1);
}

#ifdef LEAP_HAVE_CUDA
namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}
}  // namespace
#endif

Backend::Backend(bool cuda, int device, bool blocking_stream) : cuda_(cuda) {
#ifdef LEAP_HAVE_CUDA
  if (!cuda_) return;
  check(cudaSetDevice(device), "cudaSetDevice");
  // Spin while waiting for the device: the judge's wall clock over a call is the bound on
  // what the runner reports, and a sleeping wait adds tens of microseconds of noise to it.
  check(cudaSetDeviceFlags(cudaDeviceScheduleSpin), "cudaSetDeviceFlags");
  check(cudaFree(nullptr), "create the CUDA context");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, blocking_stream ? cudaStreamDefault : cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = s;
  cudaEvent_t a = nullptr, b = nullptr;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  start_ = a;
  stop_ = b;
  check(cudaMalloc(&scratch_, 256), "cudaMalloc");
  // The runtime's callback thread, started by the first host function: the driver's, in the
  // baseline the judge counts threads against, not a candidate's (an honest kernel may
  // launch host functions).
  check(cudaLaunchHostFunc(
            s, [](void*) {}, nullptr),
        "cudaLaunchHostFunc");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  Reply r;
  calibrate(r);  // lazily created driver threads and modules exist before the baseline is taken
#else
  (void)device;
  (void)blocking_stream;
  if (cuda_) die("built without CUDA");
#endif
}

char* Backend::map_arena(const Command& c, int fd) {
  size_t bytes = static_cast<size_t>(c.slots) * c.slot_bytes;
#ifdef LEAP_HAVE_CUDA
  if (cuda_) {
    cudaIpcMemHandle_t h;
    std::memcpy(&h, c.cuda_ipc_handle, sizeof h);
    void* p = nullptr;
    check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
    return static_cast<char*>(p);
  }
#endif
  if (fd < 0) die("no arena descriptor");
  // Populated now, at the load: the first call on each slot would otherwise fault its pages in
  // and have the kernel count that as the candidate's CPU time (relu's second trial: ~1 ms, 20x
  // its warm call, on the 2-core CI machine).
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) die(std::string("mmap arena: ") + std::strerror(errno));
  ::close(fd);
  return static_cast<char*>(p);
}

void Backend::calibrate(Reply& r) {
  static volatile int sink = 0;
  measure(r, [&] {
#ifdef LEAP_HAVE_CUDA
    if (cuda_) cudaMemsetAsync(scratch_, 0, 4, static_cast<cudaStream_t>(stream_));
#endif
    sink = sink + 1;
    return 0;
  });
}

void Backend::begin() {
#ifdef LEAP_HAVE_CUDA
  if (cuda_) {
    start_error_ = cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(stream_));
    return;
  }
#endif
  t0_ = now_us();
}

void Backend::end(Reply& r, int rc) {
  r.rc = rc;
#ifdef LEAP_HAVE_CUDA
  if (cuda_) {
    auto s = static_cast<cudaStream_t>(stream_);
    auto start = static_cast<cudaEvent_t>(start_), stop = static_cast<cudaEvent_t>(stop_);
    cudaError_t launch = cudaGetLastError();
    cudaError_t e = static_cast<cudaError_t>(start_error_);
    if (e == cudaSuccess) e = cudaEventRecord(stop, s);
    // Polled, so the wait is the same whatever the device's schedule flags (a candidate may set
    // blocking sync, which sleeps in the synchronisation below); then every other stream's work.
    if (e == cudaSuccess)
      while (cudaEventQuery(stop) == cudaErrorNotReady) {
      }
    cudaError_t sync = cudaDeviceSynchronize();  // work on every stream of this process
    if (e == cudaSuccess) e = launch;
    if (e == cudaSuccess) e = sync;
    float ms = 0;
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start, stop);
    r.cuda_error = static_cast<int32_t>(e);
    r.sticky = e != cudaSuccess && cudaDeviceSynchronize() != cudaSuccess;
    if (e != cudaSuccess) set_message(r, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e));
    r.elapsed_us = 1000.0 * ms;
    return;
  }
#endif
  r.elapsed_us = now_us() - t0_;
}

void start_process() {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  ::signal(SIGPIPE, SIG_IGN);
}

double hold_gpu_lock(const Options& opts) {
  if (!opts.gpu_lock) return 0;
  // A shared hold, taken through the gate like a judge's untimed work: a judge waiting to time
  // goes first, and none times while this runner makes or uses its context untimed.
  auto lock = [](int fd, int op) {
    while (::flock(fd, op) != 0)
      if (errno != EINTR) die("flock on the GPU lock");
  };
  const double t_lock = now_us();
  lock(kGpuGate, LOCK_EX);
  lock(kGpuLock, LOCK_SH);
  lock(kGpuGate, LOCK_UN);
  return now_us() - t_lock;
}

void pause_gpu_lock(const Options& opts) {
  if (opts.gpu_lock) ::flock(kGpuLock, LOCK_UN);
}

void release_gpu_lock(const Options& opts) {
  if (!opts.gpu_lock) return;
  ::close(kGpuGate);  // the hold ends with the last descriptor; candidate code never sees it
  ::close(kGpuLock);
}

std::vector<DLTensor> slot_views(const Command& layout, char* arena, uint32_t slot, bool cuda,
                                 std::vector<std::vector<int64_t>>& dims) {
  std::vector<DLTensor> views(layout.n_in + layout.n_out);
  dims.resize(views.size());
  for (size_t i = 0; i < views.size(); ++i) {
    const TensorDesc& d = layout.tensors[i];
    dims[i].assign(d.shape, d.shape + d.ndim);
    DLTensor& v = views[i];
    v.data = arena + static_cast<uint64_t>(slot) * layout.slot_bytes + d.offset;
    v.device = DLDevice{cuda ? kDLCUDA : kDLCPU, 0};
    v.ndim = d.ndim;
    v.dtype = DLDataType{d.code, d.bits, 1};
    v.shape = dims[i].data();
    v.strides = nullptr;
    v.byte_offset = 0;
  }
  return views;
}

}  // namespace leap::runner
