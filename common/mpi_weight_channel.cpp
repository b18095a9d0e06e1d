#include "common/mpi_weight_channel.h"

#include <algorithm>
#include <climits>
#include <cstdint>

namespace leap {
namespace {

class MpiWeightChannel : public WeightChannel {
 public:
  explicit MpiWeightChannel(MPI_Comm comm) : comm_(comm) {}
  void broadcast(std::vector<float>& w, bool root) override {
    uint64_t n = root ? w.size() : 0;
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, comm_);
    w.resize(n);
    for (uint64_t at = 0; at < n; at += INT_MAX) {  // MPI counts are int
      const int count = static_cast<int>(std::min<uint64_t>(INT_MAX, n - at));
      MPI_Bcast(w.data() + at, count, MPI_FLOAT, 0, comm_);
    }
  }
  std::string kind() const override { return "MPI"; }

 protected:
  void broadcast_raw(void* data, size_t n, bool root) override {
    (void)root;
    auto* p = static_cast<uint8_t*>(data);
    for (size_t at = 0; at < n; at += INT_MAX) MPI_Bcast(p + at, static_cast<int>(std::min<size_t>(INT_MAX, n - at)), MPI_BYTE, 0, comm_);
  }

 private:
  MPI_Comm comm_;
};

}  // namespace

std::unique_ptr<WeightChannel> make_mpi_weight_channel(MPI_Comm comm) { return std::make_unique<MpiWeightChannel>(comm); }

#ifndef LEAP_HAVE_NCCL
std::unique_ptr<WeightChannel> make_nccl_weight_channel(MPI_Comm, int) { return nullptr; }
bool have_nccl() { return false; }
#endif

}  // namespace leap
