#include "common/weight_channel.h"

namespace leap {

void InProcessWeightChannel::broadcast(std::vector<float>& w, bool root) {
  std::unique_lock<std::mutex> lock(mu_);
  const long round = round_;
  if (root) {
    data_ = w;
    posted_ = true;
    cv_.notify_all();
  }
  cv_.wait(lock, [&] { return posted_ && round_ == round; });
  if (!root) w = data_;
  if (++done_ == n_) {  // the last one out opens the next round; nobody enters it before
    done_ = 0;
    posted_ = false;
    ++round_;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return round_ != round; });
  }
}

}  // namespace leap
