// Weight broadcast from the learner to the workers, a collective of the learner and every
// worker: NCCL where each of them has its own GPU, MPI otherwise (see apps/run_command.cpp),
// and an in-process channel for roles running as threads.
#pragma once
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

namespace leap {

class WeightChannel {
 public:
  virtual ~WeightChannel() = default;
  // Collective: the root's `w` replaces every other participant's.
  virtual void broadcast(std::vector<float>& w, bool root) = 0;
  virtual std::string kind() const = 0;
};

class InProcessWeightChannel : public WeightChannel {
 public:
  explicit InProcessWeightChannel(int participants) : n_(participants) {}
  void broadcast(std::vector<float>& w, bool root) override;
  std::string kind() const override { return "in-process"; }
  // Wakes every participant with an error: a role failed and the rest must not wait for it.
  void abort();

 private:
  int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<float> data_;
  bool posted_ = false;
  int done_ = 0;
  long round_ = 0;
  bool aborted_ = false;
};

}  // namespace leap
