// The judge's buffers of recent tasks, kept across evaluations (see BufferCache).
#pragma once
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "worker/evald/checker.h"
#include "worker/evald/device.h"

namespace leap {

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

}  // namespace leap
