// NCCL broadcast of the weights: flat host floats staged through the device, or named tensors
// (host or device memory) packed into device buckets, each bucket one ncclBroadcast.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/mpi_weight_channel.h"

namespace leap {
namespace {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw LeapError(std::string("NCCL weight channel: ") + what + ": " + cudaGetErrorString(e));
}
void nccl_ok(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw LeapError(std::string("NCCL weight channel: ") + what + ": " + ncclGetErrorString(r));
}

class NcclWeightChannel : public WeightChannel {
 public:
  NcclWeightChannel(MPI_Comm comm, int device) : comm_(comm) {
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
    if (buf_) cudaFree(buf_);
    if (bucket_) cudaFree(bucket_);
    ncclCommDestroy(nccl_);
    cudaStreamDestroy(stream_);
  }
  void broadcast(std::vector<float>& w, bool root) override {
    uint64_t n = root ? w.size() : 0;
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, comm_);  // the size is tiny; the payload goes over NCCL
    w.resize(n);
    if (n > cap_) {
      if (buf_) cudaFree(buf_);
      cuda_ok(cudaMalloc(&buf_, n * sizeof(float)), "cudaMalloc");
      cap_ = n;
    }
    if (root) cuda_ok(cudaMemcpyAsync(buf_, w.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream_), "copy in");
    nccl_ok(ncclBroadcast(buf_, buf_, n, ncclFloat, 0, nccl_, stream_), "ncclBroadcast");
    if (!root) cuda_ok(cudaMemcpyAsync(w.data(), buf_, n * sizeof(float), cudaMemcpyDeviceToHost, stream_), "copy out");
    cuda_ok(cudaStreamSynchronize(stream_), "synchronize");
  }
  std::string kind() const override { return "NCCL"; }
  bool moves_device_memory() const override { return true; }

  BroadcastStats broadcast_tensors(const std::vector<WeightTensor>& ts, bool root, size_t bucket_bytes) override {
    agree_on_manifest(ts, root);
    const auto plan = bucket_plan(ts, bucket_bytes);
    const size_t cap = bucket_size(plan);
    BroadcastStats st;
    if (plan.empty()) return st;
    // One device bucket on one stream: pack, broadcast and unpack of a bucket run in stream
    // order, so the next bucket's packing cannot overwrite one still being sent.
    if (bucket_size_ < cap) {
      if (bucket_) cudaFree(bucket_);
      bucket_ = nullptr;
      cuda_ok(cudaMalloc(&bucket_, cap), "cudaMalloc bucket");
      bucket_size_ = cap;
    }
    auto* buf = static_cast<uint8_t*>(bucket_);
    for (const auto& pieces : plan) {
      const size_t used = pieces.back().at + pieces.back().bytes;
      st.bytes += used;
      ++st.buckets;
      if (pieces.size() == 1 && ts[pieces[0].tensor].device) {  // one range of device memory: sent in place
        auto* at = static_cast<uint8_t*>(ts[pieces[0].tensor].data) + pieces[0].offset;
        nccl_ok(ncclBroadcast(at, at, used, ncclUint8, 0, nccl_, stream_), "ncclBroadcast");
        continue;
      }
      if (root)
        for (const auto& p : pieces)
          cuda_ok(cudaMemcpyAsync(buf + p.at, static_cast<const uint8_t*>(ts[p.tensor].data) + p.offset, p.bytes,
                                  cudaMemcpyDefault, stream_),
                  "pack");
      nccl_ok(ncclBroadcast(buf, buf, used, ncclUint8, 0, nccl_, stream_), "ncclBroadcast");
      if (!root)
        for (const auto& p : pieces)
          cuda_ok(cudaMemcpyAsync(static_cast<uint8_t*>(ts[p.tensor].data) + p.offset, buf + p.at, p.bytes,
                                  cudaMemcpyDefault, stream_),
                  "unpack");
    }
    cuda_ok(cudaStreamSynchronize(stream_), "synchronize");
    return st;
  }

 protected:
  void broadcast_raw(void* data, size_t n, bool root) override {
    if (n == 0) return;
    if (n > cap_ * sizeof(float)) {
      if (buf_) cudaFree(buf_);
      buf_ = nullptr;
      cuda_ok(cudaMalloc(&buf_, n), "cudaMalloc");
      cap_ = (n + sizeof(float) - 1) / sizeof(float);
    }
    if (root) cuda_ok(cudaMemcpyAsync(buf_, data, n, cudaMemcpyHostToDevice, stream_), "copy in");
    nccl_ok(ncclBroadcast(buf_, buf_, n, ncclUint8, 0, nccl_, stream_), "ncclBroadcast");
    if (!root) cuda_ok(cudaMemcpyAsync(data, buf_, n, cudaMemcpyDeviceToHost, stream_), "copy out");
    cuda_ok(cudaStreamSynchronize(stream_), "synchronize");
  }

 private:
  MPI_Comm comm_;
  ncclComm_t nccl_{};
  cudaStream_t stream_{};
  float* buf_ = nullptr;
  uint64_t cap_ = 0;  // floats
  void* bucket_ = nullptr;
  size_t bucket_size_ = 0;
};

}  // namespace

std::unique_ptr<WeightChannel> make_nccl_weight_channel(MPI_Comm comm, int device) {
  return std::make_unique<NcclWeightChannel>(comm, device);
}
bool have_nccl() { return true; }

}  // namespace leap
