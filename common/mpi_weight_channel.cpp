#include "common/mpi_weight_channel.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>


namespace leap {
namespace {

class MpiWeightChannel : public WeightChannel {
 public:
  explicit MpiWeightChannel(MPI_Comm comm) : comm_(comm) {}
  std::string kind() const override { return "MPI"; }

  // A bucket is one MPI_Bcast of a datatype that lists its pieces' addresses: MPI moves the bytes
  // between the tensors themselves, no packing here.
  BroadcastStats broadcast_tensors(const std::vector<WeightTensor>& ts, bool root, size_t bucket_bytes) override {
    require_host(ts);
    agree_on_manifest(ts, root);
    const size_t cap = std::min<size_t>(bucket_bytes ? bucket_bytes : SIZE_MAX, INT_MAX);  // MPI counts are int
    BroadcastStats st;
    for (const auto& pieces : bucket_plan(ts, cap)) {
      std::vector<int> lengths;
      std::vector<MPI_Aint> where;
      for (const auto& p : pieces) {
        MPI_Aint a;
        MPI_Get_address(static_cast<uint8_t*>(ts[p.tensor].data) + p.offset, &a);
        lengths.push_back(static_cast<int>(p.bytes));
        where.push_back(a);
        st.bytes += p.bytes;
      }
      MPI_Datatype type;
      MPI_Type_create_hindexed(static_cast<int>(pieces.size()), lengths.data(), where.data(), MPI_BYTE, &type);
      MPI_Type_commit(&type);
      MPI_Bcast(MPI_BOTTOM, 1, type, 0, comm_);
      MPI_Type_free(&type);
      ++st.buckets;
    }
    return st;
  }

 protected:
  void broadcast_raw(void* data, size_t n, bool) override { mpi_broadcast_bytes(comm_, data, n); }

 private:
  MPI_Comm comm_;
};

}  // namespace

std::unique_ptr<WeightChannel> make_mpi_weight_channel(MPI_Comm comm) { return std::make_unique<MpiWeightChannel>(comm); }

void mpi_broadcast_bytes(MPI_Comm comm, void* data, size_t n) {
  auto* p = static_cast<uint8_t*>(data);
  for (size_t at = 0; at < n; at += INT_MAX) MPI_Bcast(p + at, static_cast<int>(std::min<size_t>(INT_MAX, n - at)), MPI_BYTE, 0, comm);
}

#ifndef LEAP_HAVE_NCCL
std::unique_ptr<WeightChannel> make_nccl_weight_channel(MPI_Comm, int) { return nullptr; }
bool have_nccl() { return false; }
#endif
#ifndef LEAP_HAVE_CUDA_IPC
std::unique_ptr<WeightChannel> make_ipc_weight_channel(MPI_Comm, std::string* why) {
  if (why) *why = "this build has no CUDA";
  return nullptr;
}
#endif

}  // namespace leap
