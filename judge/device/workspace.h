// The judge's memory, shared by every task: one arena (the buffers a runner sees) and one
// private region (pristine inputs, kept outputs), each grown when a task needs more and reused
// otherwise. Only one evaluation runs at a time in a judge, so the largest task sets the size,
// not the sum over tasks: no allocation on an evaluation's path once the largest task was seen.
// Reuse is safe because every evaluation starts after the previous candidate's runner exited.
#pragma once
#include <ATen/ATen.h>

#include <deque>
#include <memory>
#include <utility>

#include "common/clock.h"

#include "judge/device/device.h"

namespace leap {

class Workspace {
 public:
  explicit Workspace(Device& dev) : dev_(dev) {}
  // An arena of at least `bytes`: the current one scrubbed (zeroed: nothing a previous candidate
  // wrote anywhere in it reaches the next), or a fresh larger one in its place (a runner that
  // still maps the old one keeps it alive until it exits: RunnerPool::retire).
  std::shared_ptr<Arena> arena(size_t bytes);
  // Judge-private memory of at least `bytes`, valid until the next call.
  char* scratch(size_t bytes);
  size_t bytes() const;
  // The arena stops being this workspace's: a killed runner's kernels may still be writing into
  // it (the driver tears a context with a running kernel down after the process is gone), so the
  // next evaluation gets fresh memory and this one is freed only after kQuarantineS.
  void quarantine();
  static constexpr double kQuarantineS = 30;

 private:
  // Grown by a quarter more than asked: tasks of similar size do not each grow it again.
  static size_t grown(size_t bytes) { return bytes + bytes / 4; }
  Device& dev_;
  std::shared_ptr<Arena> arena_;
  at::Tensor scratch_;
  std::deque<std::pair<Clock::time_point, std::shared_ptr<Arena>>> quarantined_;
};

}  // namespace leap
