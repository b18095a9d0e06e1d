// One candidate's evaluation by the judge (leap-evald): the candidate runs in a disposable
// runner (leap-runner, sandboxed); every call gets fresh inputs and poisoned outputs, the first
// calls and a random subset of the timed ones are compared with the LibTorch reference, and the
// runner's timings are bounded by the judge's own clock. Candidate code never runs here.
#pragma once
#include <list>
#include <map>
#include <memory>
#include <string>

#include "proto/leap.capnp.h"
#include "worker/evald/checker.h"
#include "worker/evald/device.h"
#include "worker/evald/runner_pool.h"
#include "common/outcome.h"

namespace leap {

// Reference timings measured by this process, by task and device model.
using ReferenceTimings = std::map<std::string, TimingStats>;

// The arena and the judge's buffers of recent tasks, kept across evaluations: allocating and
// releasing them (a CUDA IPC arena, pristine copies, reservoir copies) costs more than a
// level-1 candidate's calls. An entry is reused only after the runner that used it has exited
// (the judge waits for that before every evaluation); least recently used entries go first.
class BufferCache {
 public:
  explicit BufferCache(size_t budget_bytes) : budget_(budget_bytes) {}
  struct Entry {
    Slots slots;
    std::shared_ptr<Arena> arena;
  };
  std::shared_ptr<Entry> find(const std::string& key);
  void put(const std::string& key, std::shared_ptr<Entry> e);

 private:
  size_t budget_, used_ = 0;
  std::list<std::pair<std::string, std::shared_ptr<Entry>>> lru_;  // most recent first
};

EvalOutcome evaluate_request(proto::EvalRequest::Reader req, Device& dev, RunnerPool& runners,
                             ReferenceTimings& reference_timings, BufferCache& buffers);

}  // namespace leap
