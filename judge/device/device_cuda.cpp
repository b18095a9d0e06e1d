// The CUDA device of the judge: plain cudaMalloc buffers, an IPC-exported arena per runner,
// an L2 flush before every candidate call, and CUDA-event timing of the reference.
#include <cuda_runtime_api.h>
#ifdef LEAP_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <cstring>

#include "common/clock.h"
#include "common/error.h"
#include "judge/device/device.h"

namespace leap {
namespace {

#define LEAP_CUDA_CHECK(expr)                                                                    \
  do {                                                                                           \
    cudaError_t err_ = (expr);                                                                   \
    if (err_ != cudaSuccess)                                                                     \
      throw LeapError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #expr ": " + \
                      cudaGetErrorString(err_));                                                 \
  } while (0)

struct IpcArena final : Arena {
  explicit IpcArena(size_t n) {
    bytes = n;
    void* p = nullptr;
    LEAP_CUDA_CHECK(cudaMalloc(&p, n));
    base = static_cast<char*>(p);
    cudaIpcMemHandle_t h;
    LEAP_CUDA_CHECK(cudaIpcGetMemHandle(&h, p));
    static_assert(sizeof h <= sizeof ipc_handle);
    std::memcpy(ipc_handle.data(), &h, sizeof h);
  }
  ~IpcArena() override {
    if (base) cudaFree(base);
  }
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    LEAP_CUDA_CHECK(cudaSetDevice(ordinal));
    cudaSetDeviceFlags(cudaDeviceScheduleSpin);  // before the context exists; ignored if LibTorch made one
    LEAP_CUDA_CHECK(cudaFree(nullptr));
    cudaDeviceProp prop{};
    LEAP_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
    name_ = prop.name;
    capability_ = prop.major * 10 + prop.minor;
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) == cudaSuccess) bus_id_ = bus;
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
  }

  at::Device torch_device() const override { return at::Device(at::kCUDA, static_cast<at::DeviceIndex>(ordinal_)); }
  std::string name() const override { return name_; }
  bool is_gpu() const override { return true; }
  std::string lock_id() const override { return bus_id_; }
  int compute_capability() const override { return capability_; }

  at::Tensor alloc(at::IntArrayRef shape, at::ScalarType type) override {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 1)) * at::elementSize(type);
    void* p = nullptr;
    LEAP_CUDA_CHECK(cudaMalloc(&p, bytes));
    return at::from_blob(
        p, shape, [](void* q) { cudaFree(q); }, at::TensorOptions().dtype(type).device(torch_device()));
  }

  std::shared_ptr<Arena> make_arena(size_t bytes) override { return std::make_shared<IpcArena>(bytes); }

  void scrub(Arena& a) override {
    LEAP_CUDA_CHECK(cudaMemsetAsync(a.base, 0, a.bytes, nullptr));
    LEAP_CUDA_CHECK(cudaDeviceSynchronize());
  }

  size_t free_memory() const override {
    size_t free = 0, total = 0;
    return cudaMemGetInfo(&free, &total) == cudaSuccess ? free : 0;
  }

  void begin_task(const std::string& task) override {
    if (task == last_task_) return;  // its reference's blocks are the ones cached: kept warm
    last_task_ = task;
#ifdef LEAP_TORCH_CUDA
    c10::cuda::CUDACachingAllocator::emptyCache();
#endif
  }

  void before_call() override {
    LEAP_CUDA_CHECK(cudaMemsetAsync(flush_, 0, flush_bytes_, nullptr));
    LEAP_CUDA_CHECK(cudaDeviceSynchronize());  // inputs, poison and flush done before the runner starts
  }

  std::string synchronize() override {
    cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? "" : std::string("CUDA error: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  }

  TimingRun time_reference(const std::function<void(size_t)>& call, size_t sets, const EvalConfig& ts) override {
    // LibTorch runs on the legacy default stream.
    TimingRun run;
    auto w0 = Clock::now();
    for (unsigned i = 0; !warmup_done(i, micros_since(w0) / 1000.0, ts); ++i) {
      call(i % sets);
      if (i % 8 == 7) LEAP_CUDA_CHECK(cudaDeviceSynchronize());
    }
    LEAP_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> samples;
    auto start = Clock::now();
    for (size_t i = 0;; ++i) {
      LEAP_CUDA_CHECK(cudaMemsetAsync(flush_, 0, flush_bytes_, nullptr));
      LEAP_CUDA_CHECK(cudaDeviceSynchronize());
      LEAP_CUDA_CHECK(cudaEventRecord(start_, nullptr));
      call(i % sets);
      LEAP_CUDA_CHECK(cudaEventRecord(stop_, nullptr));
      LEAP_CUDA_CHECK(cudaEventSynchronize(stop_));
      float ms = 0;
      LEAP_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      samples.push_back(1000.0 * ms);
      if (timing_done(samples, ts, micros_since(start) / 1000.0)) break;
    }
    run.stats = stats_of(std::move(samples));
    return run;
  }

 private:
  int ordinal_;
  std::string name_, bus_id_;
  int capability_ = 0;
  std::string last_task_;  // the task of the last evaluation planned on this device
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  void* flush_ = nullptr;
  size_t flush_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(int ordinal) { return std::make_unique<CudaDevice>(ordinal); }

}  // namespace leap
