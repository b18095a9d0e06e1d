#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cstring>

#include "common/error.h"
#include "judge/device/device.h"

namespace leap {
namespace {

// A sealed memfd: the runner can neither shrink it (which would fault the judge's reads) nor
// grow it (memory beyond its limit).
struct MemfdArena final : Arena {
  explicit MemfdArena(size_t n) {
    bytes = n;
    fd = ::memfd_create("leap-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) throw_errno("memfd_create");
    if (::ftruncate(fd, static_cast<off_t>(n)) != 0) throw_errno("ftruncate arena");
    if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) throw_errno("seal arena");
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throw_errno("mmap arena");
    base = static_cast<char*>(p);
  }
  ~MemfdArena() override {
    if (base) ::munmap(base, bytes);
    if (fd >= 0) ::close(fd);
  }
};

class CpuDevice final : public Device {
 public:
  at::Device torch_device() const override { return at::Device(at::kCPU); }
  std::string name() const override { return "cpu"; }
  bool is_gpu() const override { return false; }
  at::Tensor alloc(at::IntArrayRef shape, at::ScalarType type) override {
    return at::empty(shape, at::TensorOptions().dtype(type));
  }
  std::shared_ptr<Arena> make_arena(size_t bytes) override { return std::make_shared<MemfdArena>(bytes); }
  void scrub(Arena& a) override { std::memset(a.base, 0, a.bytes); }
  void before_call() override {}
  std::string synchronize() override { return ""; }
  // CPU time of the judge's thread: what the candidate is timed by too (the kernel's account of
  // its runner), so that other load on the machine inflates neither.
  TimingRun time_reference(const std::function<void(size_t)>& call, size_t, const EvalConfig& s) override {
    CallClock cpu;
    cpu.cpu_clock = true;
    return time_calls(
        [&] {
          call(0);
          return 0;
        },
        s, cpu);
  }
};

}  // namespace

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

}  // namespace leap
