#include "judge/device/gpu_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <tuple>

#include "common/clock.h"
#include "common/error.h"

namespace leap {

namespace {

int open_lock_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) throw_errno("open the GPU lock " + path);
  ::fchmod(fd, 0666);  // judges of other users share it; refused when another user created it
  return fd;
}

}  // namespace

GpuLock::GpuLock(const std::string& path) { std::tie(gate_, lock_) = open_gpu_lock_files(path); }

std::pair<int, int> open_gpu_lock_files(const std::string& path) {
  int gate = open_lock_file(path + ".gate");
  try {
    return {gate, open_lock_file(path + ".lock")};
  } catch (...) {
    ::close(gate);
    throw;
  }
}

GpuLock::~GpuLock() {
  for (int fd : {gate_, lock_})
    if (fd >= 0) ::close(fd);
}

void GpuLock::lock(int fd, int op) {
  auto t0 = Clock::now();
  while (::flock(fd, op) != 0)
    if (errno != EINTR) throw_errno("flock on the GPU lock");
  if (op != LOCK_UN) waited_us_ += micros_since(t0);
}

void GpuLock::shared() { hold(Hold::shared); }

void GpuLock::exclusive() { hold(Hold::exclusive); }

void GpuLock::hold(Hold want) {
  if (!enabled() || hold_ == want) return;
  // Through the gate with nothing held: a judge at the gate may be waiting for this judge's hold,
  // and one that waits to time keeps later takers behind it.
  release();
  lock(gate_, LOCK_EX);
  lock(lock_, want == Hold::shared ? LOCK_SH : LOCK_EX);
  lock(gate_, LOCK_UN);
  hold_ = want;
}

void GpuLock::release() {
  if (!enabled() || hold_ == Hold::none) return;
  lock(lock_, LOCK_UN);
  hold_ = Hold::none;
}

double GpuLock::take_waited_us() {
  double w = waited_us_;
  waited_us_ = 0;
  return w;
}

std::string gpu_lock_path(const std::string& pci_bus_id) {
  const char* dir = std::getenv("LEAP_LOCK_DIR");
  std::string name;
  for (char c : pci_bus_id) name += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
  return std::string(dir && *dir ? dir : "/tmp") + "/leap-gpu-" + name;
}

}  // namespace leap
