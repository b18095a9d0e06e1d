#include <algorithm>

#include "common/clock.h"
#include "worker/evald/device.h"

namespace leap {
namespace {

class CpuDevice final : public Device {
 public:
  at::Device torch_device() const override { return at::Device(at::kCPU); }
  std::string name() const override { return "cpu"; }
  at::Tensor alloc(at::IntArrayRef shape, at::ScalarType type) override {
    return at::empty(shape, at::TensorOptions().dtype(type));
  }
  void* stream() override { return nullptr; }
  std::string finish_call(bool* sticky) override {
    *sticky = false;
    return "";
  }
  TimingRun time_candidate(const std::function<int(size_t)>& call, size_t, const std::function<void(size_t)>&,
                           const TimingSettings& s) override {
    // Caches stay warm on CPU, as in a real pipeline; outputs are overwritten each call.
    return time_calls([&] { return call(0); }, s);
  }
  TimingRun time_reference(const std::function<void(size_t)>& call, size_t, const TimingSettings& s) override {
    return time_calls([&] { call(0); return 0; }, s);
  }
  WallAndEvents synchronised_wall(const std::function<int(size_t)>& call, size_t, const std::function<void(size_t)>&,
                                  unsigned calls) override {
    std::vector<double> v;
    for (unsigned i = 0; i < calls; ++i) {
      auto t0 = Clock::now();
      call(0);
      v.push_back(micros_since(t0));
    }
    double m = stats_of(v).median_us;
    return {m, m};
  }
  bool is_gpu() const override { return false; }
};

}  // namespace

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

}  // namespace leap
