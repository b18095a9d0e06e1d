#include "common/weight_channel.h"

#include "common/error.h"

namespace leap {

void InProcessWeightChannel::broadcast(std::vector<float>& w, bool root) {
  std::unique_lock<std::mutex> lock(mu_);
  const long round = round_;
  if (root) {
    data_ = w;
    posted_ = true;
    cv_.notify_all();
  }
  cv_.wait(lock, [&] { return aborted_ || (posted_ && round_ == round); });
  if (aborted_) throw LeapError("weight broadcast aborted: another role failed");
  if (!root) w = data_;
  if (++done_ == n_) {  // the last one out opens the next round; nobody enters it before
    done_ = 0;
    posted_ = false;
    ++round_;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return aborted_ || round_ != round; });
    if (aborted_) throw LeapError("weight broadcast aborted: another role failed");
  }
}

void InProcessWeightChannel::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

}  // namespace leap
