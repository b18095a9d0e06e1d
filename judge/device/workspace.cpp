#include "judge/device/workspace.h"

#include <unistd.h>

namespace leap {
namespace {

// A device allocation that fails right after a candidate's runner was killed may only be the
// runner's memory not yet returned: wait once, then try again (only a failure then is leap's).
template <class F>
auto with_retry(F&& f) {
  try {
    return f();
  } catch (const std::exception&) {
    ::usleep(200000);
    return f();
  }
}

}  // namespace

std::shared_ptr<Arena> Workspace::arena(size_t bytes) {
  while (!quarantined_.empty() && micros_since(quarantined_.front().first) > kQuarantineS * 1e6)
    quarantined_.pop_front();
  if (!arena_ || arena_->bytes < bytes) {
    arena_.reset();
    try {
      arena_ = dev_.make_arena(grown(bytes));
    } catch (const std::exception&) {  // no room to grow ahead: exactly what is needed
      arena_ = with_retry([&] { return dev_.make_arena(bytes); });
    }
  } else {
    dev_.scrub(*arena_);  // the previous candidate's runner could write all of it
  }
  return arena_;
}

char* Workspace::scratch(size_t bytes) {
  if (!scratch_.defined() || static_cast<size_t>(scratch_.nbytes()) < bytes) {
    scratch_ = at::Tensor();
    try {
      scratch_ = dev_.alloc({static_cast<int64_t>(grown(bytes))}, at::kByte);
    } catch (const std::exception&) {
      scratch_ = with_retry([&] { return dev_.alloc({static_cast<int64_t>(bytes)}, at::kByte); });
    }
  }
  return static_cast<char*>(scratch_.data_ptr());
}

void Workspace::quarantine() {
  if (arena_) quarantined_.emplace_back(Clock::now(), std::move(arena_));
  arena_.reset();
}

size_t Workspace::bytes() const {
  return (arena_ ? arena_->bytes : 0) + (scratch_.defined() ? static_cast<size_t>(scratch_.nbytes()) : 0);
}

}  // namespace leap
