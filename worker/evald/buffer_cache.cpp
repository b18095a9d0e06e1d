#include "worker/evald/buffer_cache.h"

namespace leap {

std::shared_ptr<BufferCache::Entry> BufferCache::find(const std::string& key) {
  for (auto it = lru_.begin(); it != lru_.end(); ++it)
    if (it->first == key) {
      lru_.splice(lru_.begin(), lru_, it);
      return lru_.front().second;
    }
  return nullptr;
}

void BufferCache::put(const std::string& key, std::shared_ptr<Entry> e) {
  if (e->slots.bytes > budget_) return;
  used_ += e->slots.bytes;
  lru_.emplace_front(key, std::move(e));
  while (used_ > budget_) {
    used_ -= lru_.back().second->slots.bytes;
    lru_.pop_back();
  }
}

}  // namespace leap
