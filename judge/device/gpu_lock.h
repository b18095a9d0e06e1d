// Timing on a GPU is exclusive among the judges of one machine. Several judges may share a GPU
// (`[sandbox] gpus`): their untimed work (loading, correctness trials, verification, a retired
// runner's teardown) overlaps, but while one judge times (the reference, calibrations, warm-up
// and timed calls) no other judge or its runner touches the device. A reader-writer lock over
// two lock files (flock): a gate every taker passes, held by a judge that waits to time, so
// untimed work cannot starve timing. Runners never see these files (their /tmp is their own).
#pragma once
#include <string>
#include <utility>

namespace leap {

class GpuLock {
 public:
  GpuLock() = default;  // no lock: every call returns at once (the CPU backend)
  // `path`: the lock's base name (files `path`.gate and `path`.lock, created if absent).
  explicit GpuLock(const std::string& path);
  ~GpuLock();
  GpuLock(const GpuLock&) = delete;
  GpuLock& operator=(const GpuLock&) = delete;

  void shared();     // untimed work: waits while a judge times or waits to time
  void exclusive();  // timing: drops this judge's hold, then waits for every other holder
  void release();
  bool enabled() const { return lock_ >= 0; }
  // Timing for as long as it lives; back to untimed work when it goes, however the timing ended.
  class Timing {
   public:
    explicit Timing(GpuLock& l) : l_(l) { l_.exclusive(); }
    ~Timing() { l_.shared(); }
    Timing(const Timing&) = delete;
    Timing& operator=(const Timing&) = delete;

   private:
    GpuLock& l_;
  };
  // Time spent waiting for the lock since the last call of this function, in microseconds.
  double take_waited_us();

 private:
  enum class Hold { none, shared, exclusive };
  void hold(Hold want);
  void lock(int fd, int op);

  int gate_ = -1, lock_ = -1;
  Hold hold_ = Hold::none;
  double waited_us_ = 0;
};

// The lock's two files opened afresh (gate, lock; close-on-exec): for a runner, which holds its own
// shared hold while it creates its CUDA context, so that no judge times meanwhile.
std::pair<int, int> open_gpu_lock_files(const std::string& path);

// The lock of a GPU named by its PCI bus id ("0000:3b:00.0"), in $LEAP_LOCK_DIR or /tmp: judges
// of any process on this machine that time on that GPU share it.
std::string gpu_lock_path(const std::string& pci_bus_id);

}  // namespace leap
