// What every runner does whatever language its candidate is in: the channel, the backend and its
// timing of a call, the trusted start and the confinement before candidate code loads. Used by
// leap-runner (C ABI candidates, runner_process.cpp) and by the Python runner's native part
// (python_core.cpp, loaded by pyrunner.py). No LibTorch, no logging library.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "judge/runner/protocol.h"

namespace leap::runner {

constexpr int kChannel = 3;
constexpr int kGpuGate = 5, kGpuLock = 6;  // --gpu-lock

struct Options {
  bool cuda = false;
  int device = 0;
  int core = -1;
  bool gpu_lock = false;     // fds 5 and 6: the judges' GPU lock (gate, lock), held shared while the context is made
  int cuda_connections = 0;  // hardware work queues of the runner's context (0: the driver's default)
  bool seccomp = true;
  bool seccomp_debug = false;
  // The candidate's kernels launch on the legacy default stream as often as on the current one
  // (KernelBench answers): the measured stream then synchronises with it (a blocking stream).
  bool blocking_stream = false;
};

[[noreturn]] void die(const std::string& why);
double now_us();
void send_reply(Reply r);
void set_message(Reply& r, const std::string& m);
// Receives one message of up to `n` bytes from the channel and up to `max_fds` (<= 8) descriptors
// passed with it: the bytes received (0 at the channel's end, -1 on error).
ssize_t receive_with_fds(void* data, size_t n, std::vector<int>& fds, int max_fds);
// Receives one command and up to `max_fds` descriptors passed with it; false at the channel's end.
bool receive(Command& c, std::vector<int>& fds, int max_fds = 2);
// Reads one command once loaded (no descriptors accepted); false at the channel's end.
bool receive_plain(Command& c);
// The runner's process as the judge wants it, first thing: killed with its parent, no new
// privileges, a closed channel is an error (not SIGPIPE).
void start_process();
Options parse(int argc, char** argv);
// The trusted start: no core dumps, no growing files, the judge's core, the GPU lock held while
// the CUDA context is made; returns the time it waited for that lock.
double start_confined(const Options& opts);
// start_confined's part that holds no lock and leaves descriptors as they are (the Python runners'
// zygote, whose runners inherit it).
void prepare(const Options& opts);
// Ends the GPU lock's hold (once the context exists): candidate code never sees its descriptors.
void release_gpu_lock(const Options& opts);
// A hold paused and taken again (the Python runner: its import of PyTorch is seconds of CPU work
// that touches no device, and a judge may time meanwhile); hold returns the time it waited.
void pause_gpu_lock(const Options& opts);
double hold_gpu_lock(const Options& opts);
// Everything the candidate could use to reach beyond its limits is decided here, before it loads.
void confine(const Command& c, bool cuda, const Options& opts);

class Backend {
 public:
  Backend(bool cuda, int device, bool blocking_stream = false);
  // Maps the arena: the judge's memfd (CPU) or its CUDA IPC allocation.
  char* map_arena(const Command& c, int fd);
  void* stream() const { return stream_; }
  bool cuda() const { return cuda_; }
  void calibrate(Reply& r);
  // A call's timing, split for callers that cannot pass a callable (the Python runner): begin,
  // the call, end with its return value.
  void begin();
  void end(Reply& r, int rc);
  template <class F>
  void measure(Reply& r, F&& call) {
    begin();
    const int rc = call();
    end(r, rc);
  }

 private:
  bool cuda_;
  void* stream_ = nullptr;
  void* start_ = nullptr;
  void* stop_ = nullptr;
  void* scratch_ = nullptr;
  double t0_ = 0;
  int start_error_ = 0;  // cudaError_t of the start event's record
};

// The layout's tensors in slot `slot` of the arena, rebuilt for every call (the candidate may
// scribble on the previous ones); `dims` holds their shapes.
std::vector<DLTensor> slot_views(const Command& layout, char* arena, uint32_t slot, bool cuda,
                                 std::vector<std::vector<int64_t>>& dims);

}  // namespace leap::runner
