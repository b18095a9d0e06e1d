// The CUDA device of leap-evald: plain cudaMalloc buffers, a non-blocking stream for the
// candidate, CUDA-event timing with an L2 flush before every timed call.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "common/clock.h"
#include "common/error.h"
#include "worker/evald/device.h"

namespace leap {
namespace {

#define LEAP_CUDA_CHECK(expr)                                                                        \
  do {                                                                                               \
    cudaError_t err_ = (expr);                                                                       \
    if (err_ != cudaSuccess)                                                                         \
      throw LeapError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #expr ": " +    \
                      cudaGetErrorString(err_));                                                     \
  } while (0)

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    LEAP_CUDA_CHECK(cudaSetDevice(ordinal));
    LEAP_CUDA_CHECK(cudaFree(nullptr));  // create the context now, before the sandbox closes
    cudaDeviceProp prop{};
    LEAP_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
    name_ = prop.name;
    LEAP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    LEAP_CUDA_CHECK(cudaEventCreate(&start_));
    LEAP_CUDA_CHECK(cudaEventCreate(&stop_));
    int l2 = 0;
    LEAP_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, ordinal));
    flush_bytes_ = std::max<size_t>(2 * static_cast<size_t>(l2), 8u << 20);
    LEAP_CUDA_CHECK(cudaMalloc(&flush_, flush_bytes_));
  }
  ~CudaDevice() override {
    cudaFree(flush_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }

  at::Device torch_device() const override { return at::Device(at::kCUDA, static_cast<at::DeviceIndex>(ordinal_)); }
  std::string name() const override { return name_; }
  bool is_gpu() const override { return true; }

  at::Tensor alloc(at::IntArrayRef shape, at::ScalarType type) override {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 1)) * at::elementSize(type);
    void* p = nullptr;
    LEAP_CUDA_CHECK(cudaMalloc(&p, bytes));
    return at::from_blob(p, shape, [](void* q) { cudaFree(q); },
                         at::TensorOptions().dtype(type).device(torch_device()));
  }

  void* stream() override { return stream_; }

  std::string finish_call(bool* sticky) override {
    cudaError_t e = cudaStreamSynchronize(stream_);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();  // work sent to other streams too
    if (e == cudaSuccess) e = cudaGetLastError();
    *sticky = e != cudaSuccess;
    return e == cudaSuccess ? "" : std::string("CUDA error: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  }

  TimingRun time_candidate(const std::function<int(size_t)>& call, size_t sets,
                           const std::function<void(size_t)>& prepare, const TimingSettings& s) override {
    return timed(stream_, [&](size_t k) { return call(k); }, sets, prepare, s);
  }

  TimingRun time_reference(const std::function<void(size_t)>& call, size_t sets, const TimingSettings& s) override {
    // LibTorch runs on the legacy default stream.
    return timed(nullptr, [&](size_t k) { call(k); return 0; }, sets, [](size_t) {}, s);
  }

  WallAndEvents synchronised_wall(const std::function<int(size_t)>& call, size_t sets,
                                  const std::function<void(size_t)>& prepare, unsigned calls) override {
    std::vector<double> wall, events;
    for (unsigned i = 0; i < calls; ++i) {
      size_t k = i % sets;
      prepare(k);
      flush(stream_);
      LEAP_CUDA_CHECK(cudaDeviceSynchronize());
      auto t0 = Clock::now();
      LEAP_CUDA_CHECK(cudaEventRecord(start_, stream_));
      if (call(k) != 0) break;
      LEAP_CUDA_CHECK(cudaEventRecord(stop_, stream_));
      if (cudaDeviceSynchronize() != cudaSuccess) break;
      wall.push_back(micros_since(t0));
      float ms = 0;
      LEAP_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      events.push_back(1000.0 * ms);
    }
    return {stats_of(wall).median_us, stats_of(events).median_us};
  }

 private:
  void flush(cudaStream_t s) { LEAP_CUDA_CHECK(cudaMemsetAsync(flush_, 0, flush_bytes_, s)); }

  TimingRun timed(cudaStream_t s, const std::function<int(size_t)>& call, size_t sets,
                  const std::function<void(size_t)>& prepare, const TimingSettings& ts) {
    TimingRun run;
    auto w0 = Clock::now();
    for (unsigned i = 0; i < ts.warmup_calls || micros_since(w0) < 1000 * ts.warmup_ms; ++i) {
      prepare(i % sets);
      if ((run.error = call(i % sets)) != 0) return run;
      if (i % 8 == 7) LEAP_CUDA_CHECK(cudaDeviceSynchronize());  // wall time must mean GPU time
    }
    LEAP_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> samples;
    auto start = Clock::now();
    for (size_t i = 0;; ++i) {
      size_t k = i % sets;
      prepare(k);
      flush(s);
      LEAP_CUDA_CHECK(cudaDeviceSynchronize());  // preparation never overlaps the window
      LEAP_CUDA_CHECK(cudaEventRecord(start_, s));
      if ((run.error = call(k)) != 0) return run;
      LEAP_CUDA_CHECK(cudaEventRecord(stop_, s));
      cudaError_t e = cudaEventSynchronize(stop_);
      if (e != cudaSuccess) {
        run.error = -1;
        return run;
      }
      float ms = 0;
      LEAP_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      samples.push_back(1000.0 * ms);
      if (samples.size() >= ts.max_samples) break;
      if (samples.size() >= ts.min_samples) {
        auto st = stats_of(samples);
        if (st.rse <= ts.rse_target || micros_since(start) / 1000.0 >= ts.budget_ms) break;
      }
    }
    run.stats = stats_of(std::move(samples));
    return run;
  }

  int ordinal_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  void* flush_ = nullptr;
  size_t flush_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(int ordinal) { return std::make_unique<CudaDevice>(ordinal); }

}  // namespace leap
