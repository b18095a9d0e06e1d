// The judge <-> runner channel: fixed-size plain structs over a SOCK_SEQPACKET socket pair.
// The runner is where candidate code runs, so everything it sends is untrusted data that the
// judge validates (size, magic, sequence number) and cross-checks; nothing here is parsed with
// a general-purpose decoder. Header-only and dependency-free: leap-runner links no LibTorch,
// Cap'n Proto or logging library, so that it starts in milliseconds.
#pragma once
#include <cstdint>

namespace leap::runner {

constexpr uint32_t kMagic = 0x314E524Cu;  // "LRN1"
constexpr int kMaxTensors = 32;
constexpr int kMaxDims = 8;
// Descriptors a load carries: the candidate (or the Python runner's manifest), the arena (CPU)
// and up to six load_inline extensions.
constexpr int kMaxLoadFds = 8;

enum class Op : uint32_t {
  calibrate = 1,  // a trusted no-op call (before the candidate is loaded): the judge's overhead baseline
  load = 2,       // map the buffers, close the sandbox, load the candidate (fds: library [, arena])
  call = 3,       // one call of leap_kernel on the tensors of a slot
};

struct TensorDesc {
  uint64_t offset = 0;  // bytes from the start of a slot
  int32_t ndim = 0;
  uint8_t code = 0, bits = 0;  // DLDataType
  uint8_t pad[2] = {};
  int64_t shape[kMaxDims] = {};
};

struct Command {
  uint32_t magic = kMagic;
  Op op = Op::call;
  uint64_t seq = 0;
  uint32_t slot = 0;
  uint32_t audit = 0;  // call: the Python runner records what the call runs (a correctness call)
  // load only
  uint32_t slots = 0, n_in = 0, n_out = 0;
  uint64_t slot_bytes = 0;
  uint64_t memory_limit_bytes = 0;  // host memory the candidate may use beyond the arena
  char cuda_ipc_handle[64] = {};    // cudaIpcMemHandle_t of the arena (CUDA)
  TensorDesc tensors[kMaxTensors];  // inputs, then outputs
};

enum class ReplyKind : uint32_t { ready = 1, loaded = 2, called = 3, failed = 4 };

struct Reply {
  uint32_t magic = kMagic;
  ReplyKind kind = ReplyKind::ready;
  uint64_t seq = 0;
  int32_t rc = 0;          // leap_kernel's return value (or kEscapedException)
  int32_t cuda_error = 0;  // cudaError_t after the call, 0 = none
  uint32_t sticky = 0;     // the CUDA context is unusable after this error
  uint32_t reserved = 0;
  double elapsed_us = 0;              // the runner's timing of the call: CUDA events on its stream, or wall on CPU;
                                      // in the ready reply: its own start (main to ready: the CUDA context)
  double map_us = 0, library_us = 0;  // load: mapping the buffers, loading the candidate (diagnostics)
  double lock_wait_us = 0;            // ready: of elapsed_us, the wait for the judges' GPU lock (a judge was timing)
  char message[512] = {};             // NUL-terminated; untrusted text, sanitised by the judge
};

// The Python runners' zygote (pyrunner.py --zygote): one sandbox whose interpreter has imported
// what candidates use and forks a runner per request. It never runs candidate code; its runners do,
// beside it in its sandbox.
constexpr uint32_t kZygoteMagic = 0x315A474Cu;  // "LGZ1"
enum class ZygoteOp : uint32_t {
  fork = 1,  // fds: the runner's channel and stderr [, the GPU lock's gate and lock]
  kill = 2,  // SIGKILL to the runner of `token` (one whose pid the judge has not seen)
};
struct ZygoteRequest {
  uint32_t magic = kZygoteMagic;
  ZygoteOp op = ZygoteOp::fork;
  uint64_t token = 0;  // the judge's name for the runner
};
enum class ZygoteEvent : uint32_t {
  ready = 1,  // imports done (token 0): forks from now on take milliseconds
  ended = 2,  // the runner of `token` is reaped; `status` is its wait status
};
struct ZygoteReport {
  uint32_t magic = kZygoteMagic;
  ZygoteEvent event = ZygoteEvent::ready;
  uint64_t token = 0;
  int32_t status = 0;
  uint32_t reserved = 0;
  double elapsed_us = 0;  // ready: the zygote's start to ready
};

constexpr int32_t kEscapedException = -0x7EEE;
constexpr int32_t kPythonException = -0x7EEF;  // the Python runner: ModelNew raised (message: what)
// The Python runner's audit of a correctness call broke the format's rule (message: what ran). An
// admission the candidate can only make against itself.
constexpr int32_t kNoCustomKernel = -0x7EF0;
constexpr int32_t kVendorLibrary = -0x7EF1;

}  // namespace leap::runner
