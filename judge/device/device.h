// Where the judge computes inside leap-evald: CPU, or one CUDA GPU. Owns plain (non-caching)
// allocations, the arena shared with a candidate's runner (a sealed memfd on CPU, a CUDA IPC
// allocation on the GPU), cache flushing between calls, and timing of the LibTorch reference.
// Candidate code never runs in this process: the runner (leap-runner) calls the candidate.
#pragma once
#include <ATen/ATen.h>

#include <array>
#include <functional>
#include <memory>
#include <string>

#include "judge/timing/timing.h"

namespace leap {

// Memory the judge shares with one runner. Destroying it releases the judge's mapping; a GPU
// arena is only destroyed once the runner that opened it is gone.
struct Arena {
  virtual ~Arena() = default;
  char* base = nullptr;
  size_t bytes = 0;
  int fd = -1;                        // CPU: the memfd handed to the runner
  std::array<char, 64> ipc_handle{};  // GPU: cudaIpcMemHandle_t
};

class Device {
 public:
  virtual ~Device() = default;
  virtual at::Device torch_device() const = 0;
  virtual std::string name() const = 0;  // "cpu" or the GPU model
  virtual bool is_gpu() const = 0;
  // What judges sharing this device coordinate their timing on: the GPU's PCI bus id ("" on the
  // CPU, where every judge times on a core of its own).
  virtual std::string lock_id() const { return ""; }
  // A GPU's compute capability as major * 10 + minor (90 on an H100/H200); 0 for the CPU.
  virtual int compute_capability() const { return 0; }
  // A plain allocation (cudaMalloc on the GPU, never the caching allocator).
  virtual at::Tensor alloc(at::IntArrayRef shape, at::ScalarType type) = 0;
  virtual std::shared_ptr<Arena> make_arena(size_t bytes) = 0;
  // Zeroes all of an arena (what the last candidate wrote there is not the next one's).
  virtual void scrub(Arena& a) = 0;
  // Device memory free now (0: not bounded by the judge, the CPU).
  virtual size_t free_memory() const { return 0; }
  // Before an evaluation's memory is planned: a task other than the last one's gets back what
  // LibTorch's caching allocator kept from earlier references (GPU), which no plan counts as free.
  virtual void begin_task(const std::string& task) { (void)task; }
  // A tensor over arena memory (no ownership).
  at::Tensor view(const Arena& a, size_t offset, at::IntArrayRef shape, at::ScalarType type) const {
    return at::from_blob(a.base + offset, shape, at::TensorOptions().dtype(type).device(torch_device()));
  }
  // Before a candidate call: the judge's writes complete and visible, caches flushed (GPU L2).
  virtual void before_call() = 0;
  // Times `call(set)` of the reference rotating over `sets` input sets.
  virtual TimingRun time_reference(const std::function<void(size_t)>& call, size_t sets, const EvalConfig& s) = 0;
  // Waits for the judge's own work; "" or the error.
  virtual std::string synchronize() = 0;
};

std::unique_ptr<Device> make_cpu_device();
// Throws LeapError when leap was built without CUDA or the GPU cannot be initialised.
std::unique_ptr<Device> make_cuda_device(int ordinal);

}  // namespace leap
