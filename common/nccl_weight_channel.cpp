// NCCL broadcast of the weights: host bytes (the flat vector) staged through the device, or named
// tensors (host or device memory) packed into device buckets, each bucket one ncclBroadcast.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/device_buckets.h"
#include "common/error.h"
#include "common/mpi_weight_channel.h"

namespace leap {
namespace {

void nccl_ok(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw LeapError(std::string("NCCL weight channel: ") + what + ": " + ncclGetErrorString(r));
}

class NcclWeightChannel : public WeightChannel {
 public:
  NcclWeightChannel(MPI_Comm comm, int device) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ncclUniqueId id;
    if (rank == 0) nccl_ok(ncclGetUniqueId(&id), "unique id");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
    cuda_ok(cudaSetDevice(device), "cudaSetDevice");
    cuda_ok(cudaStreamCreate(&stream_), "stream");
    nccl_ok(ncclCommInitRank(&nccl_, size, id, rank), "ncclCommInitRank");
  }
  ~NcclWeightChannel() override {
    if (staging_) cudaFree(staging_);
    ncclCommDestroy(nccl_);
    cudaStreamDestroy(stream_);
  }
  std::string kind() const override { return "NCCL"; }
  bool moves_device_memory() const override { return true; }

  BroadcastStats broadcast_tensors(const std::vector<WeightTensor>& ts, bool root, size_t bucket_bytes) override {
    agree_on_manifest(ts, root);
    const auto plan = bucket_plan(ts, bucket_bytes);
    BroadcastStats st;
    if (plan.empty()) return st;
    // One device bucket on one stream: pack, broadcast and unpack of a bucket run in stream
    // order, so the next bucket's packing cannot overwrite one still being sent.
    uint8_t* buf = staging(bucket_size(plan));
    for (const auto& pieces : plan) {
      const size_t used = pieces.back().at + pieces.back().bytes;
      st.bytes += used;
      ++st.buckets;
      if (pieces.size() == 1 && ts[pieces[0].tensor].device) {  // one range of device memory: sent in place
        auto* at = static_cast<uint8_t*>(ts[pieces[0].tensor].data) + pieces[0].offset;
        nccl_ok(ncclBroadcast(at, at, used, ncclUint8, 0, nccl_, stream_), "ncclBroadcast");
        continue;
      }
      if (root) copy_bucket(ts, pieces, buf, true, stream_, kind());
      nccl_ok(ncclBroadcast(buf, buf, used, ncclUint8, 0, nccl_, stream_), "ncclBroadcast");
      if (!root) copy_bucket(ts, pieces, buf, false, stream_, kind());
    }
    cuda_ok(cudaStreamSynchronize(stream_), "synchronize");
    return st;
  }

 protected:
  // Host bytes staged through the device.
  void broadcast_raw(void* data, size_t n, bool root) override {
    if (n == 0) return;
    uint8_t* buf = staging(n);
    if (root) cuda_ok(cudaMemcpyAsync(buf, data, n, cudaMemcpyHostToDevice, stream_), "copy in");
    nccl_ok(ncclBroadcast(buf, buf, n, ncclUint8, 0, nccl_, stream_), "ncclBroadcast");
    if (!root) cuda_ok(cudaMemcpyAsync(data, buf, n, cudaMemcpyDeviceToHost, stream_), "copy out");
    cuda_ok(cudaStreamSynchronize(stream_), "synchronize");
  }

 private:
  void cuda_ok(cudaError_t e, const char* what) const { channel_cuda_ok(e, kind(), what); }
  // The device buffer of at least `n` bytes that the host bytes and buckets pass through.
  uint8_t* staging(size_t n) {
    if (n > staging_bytes_) {
      if (staging_) cudaFree(staging_);
      staging_ = nullptr;
      cuda_ok(cudaMalloc(&staging_, n), "cudaMalloc");
      staging_bytes_ = n;
    }
    return static_cast<uint8_t*>(staging_);
  }

  ncclComm_t nccl_{};
  cudaStream_t stream_{};
  void* staging_ = nullptr;
  size_t staging_bytes_ = 0;
};

}  // namespace

std::unique_ptr<WeightChannel> make_nccl_weight_channel(MPI_Comm comm, int device) {
  return std::make_unique<NcclWeightChannel>(comm, device);
}
bool have_nccl() { return true; }

}  // namespace leap
