// Where candidates run inside leap-evald: CPU, or one CUDA GPU. Owns allocation of plain
// (non-caching) buffers, the stream handed to candidates, completion and error checks after
// a call, and the timing method of the backend (steady clock on CPU; CUDA events with L2
// flushes on the GPU). Candidate-independent: no checks live here.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>

#include "worker/evald/timing.h"

namespace leap {

class Device {
 public:
  virtual ~Device() = default;
  virtual at::Device torch_device() const = 0;
  virtual std::string name() const = 0;  // "cpu" or the GPU model
  // A plain allocation (cudaMalloc on the GPU, never the caching allocator).
  virtual at::Tensor alloc(at::IntArrayRef shape, at::ScalarType type) = 0;
  virtual void* stream() = 0;  // handed to the candidate; nullptr on CPU
  // Waits for everything a call launched. Returns "" or the error; *sticky is set when the
  // device is unusable afterwards (the evaluator must be replaced).
  virtual std::string finish_call(bool* sticky) = 0;
  // Times `call(set)` rotating over `sets` input sets; `prepare(set)` runs before every call,
  // outside the measured window (poisoning outputs, flushing caches).
  virtual TimingRun time_candidate(const std::function<int(size_t)>& call, size_t sets,
                                   const std::function<void(size_t)>& prepare, const TimingSettings& s) = 0;
  virtual TimingRun time_reference(const std::function<void(size_t)>& call, size_t sets, const TimingSettings& s) = 0;
  // Medians over the same calls of: wall-clock time with the whole device synchronised
  // around the call, and the event-timed span on the evaluator's stream.
  struct WallAndEvents {
    double wall_us = 0, events_us = 0;
  };
  virtual WallAndEvents synchronised_wall(const std::function<int(size_t)>& call, size_t sets,
                                          const std::function<void(size_t)>& prepare, unsigned calls) = 0;
  virtual bool is_gpu() const = 0;
};

std::unique_ptr<Device> make_cpu_device();
// Throws LeapError when leap was built without CUDA or the GPU cannot be initialised.
std::unique_ptr<Device> make_cuda_device(int ordinal);

}  // namespace leap
