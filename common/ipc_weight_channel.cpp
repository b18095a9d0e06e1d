// Weights between ranks that share one GPU (a one-GPU machine running learner and workers): the
// learner packs each bucket into a device buffer of its own that the others have mapped (CUDA
// IPC), and they copy it into their tensors, device to device. MPI carries the handle and the
// "bucket ready" / "bucket read" barriers; no byte passes through the host (staged through it over
// MPI, with its checksum hashed there, a 0.5B bf16 model's broadcast took 1.8 s a step on the H200).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <exception>
#include <string>
#include <vector>

#include "common/device_buckets.h"
#include "common/error.h"
#include "common/mpi_weight_channel.h"

namespace leap {
namespace {

std::string cuda_text(cudaError_t e, const char* what) { return std::string(what) + ": " + cudaGetErrorString(e); }

// The probe's message from the learner: whether it exported a buffer, and the handle.
struct Header {
  uint64_t bytes = 0;
  cudaIpcMemHandle_t handle{};
};

class IpcWeightChannel : public WeightChannel {
 public:
  explicit IpcWeightChannel(MPI_Comm comm) : comm_(comm) {
    cuda_ok(cudaSetDevice(0), "cudaSetDevice");
    cuda_ok(cudaStreamCreate(&stream_), "stream");
  }
  ~IpcWeightChannel() override {
    if (mapped_) cudaIpcCloseMemHandle(mapped_);
    // Freeing memory another process still maps is undefined: the learner frees its buffer once
    // every mapping is closed (unless this rank is failing, when the others may never come).
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && std::uncaught_exceptions() == 0) MPI_Barrier(comm_);
    if (own_) cudaFree(own_);
    cudaStreamDestroy(stream_);
  }
  std::string kind() const override { return "CUDA IPC"; }
  bool moves_device_memory() const override { return true; }

  BroadcastStats broadcast_tensors(const std::vector<WeightTensor>& ts, bool root, size_t bucket_bytes) override {
    agree_on_manifest(ts, root);
    const auto plan = bucket_plan(ts, bucket_bytes);
    BroadcastStats st;
    if (plan.empty()) return st;
    uint8_t* buf = buffer(bucket_size(plan), root);
    for (const auto& pieces : plan) {
      st.bytes += pieces.back().at + pieces.back().bytes;
      ++st.buckets;
      if (root) {
        copy_bucket(ts, pieces, buf, true, stream_, kind());
        cuda_ok(cudaStreamSynchronize(stream_), "synchronize");
      }
      MPI_Barrier(comm_);  // the bucket is in the learner's buffer
      if (!root) {
        copy_bucket(ts, pieces, buf, false, stream_, kind());
        cuda_ok(cudaStreamSynchronize(stream_), "synchronize");
      }
      MPI_Barrier(comm_);  // every worker has read it: the next bucket may overwrite it
    }
    return st;
  }

 protected:
  void broadcast_raw(void* data, size_t n, bool) override { mpi_broadcast_bytes(comm_, data, n); }

 private:
  void cuda_ok(cudaError_t e, const char* what) const { channel_cuda_ok(e, kind(), what); }
  // The learner's buffer of at least `n` bytes: its own on the root, mapped on the others. A larger
  // one replaces it: the others unmap the old one before the learner frees it (freeing memory
  // another process maps is undefined), then map the new one.
  uint8_t* buffer(size_t n, bool root) {
    uint64_t need = root ? n : 0;
    mpi_broadcast_bytes(comm_, &need, sizeof need);
    if (need > bytes_) {
      if (mapped_) cuda_ok(cudaIpcCloseMemHandle(mapped_), "cudaIpcCloseMemHandle");
      mapped_ = nullptr;
      MPI_Barrier(comm_);
      if (root) {
        if (own_) cuda_ok(cudaFree(own_), "cudaFree");
        own_ = nullptr;
        cuda_ok(cudaMalloc(&own_, need), "cudaMalloc");
        cuda_ok(cudaIpcGetMemHandle(&handle_, own_), "cudaIpcGetMemHandle");
      }
      mpi_broadcast_bytes(comm_, &handle_, sizeof handle_);
      if (!root) cuda_ok(cudaIpcOpenMemHandle(&mapped_, handle_, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
      bytes_ = need;  // the same on every rank
    }
    return static_cast<uint8_t*>(root ? own_ : mapped_);
  }

  MPI_Comm comm_;
  cudaStream_t stream_{};
  size_t bytes_ = 0;             // the learner's buffer's size
  cudaIpcMemHandle_t handle_{};  // and its handle
  void* own_ = nullptr;          // the root's buffer
  void* mapped_ = nullptr;       // the root's buffer as another rank maps it
};

// One byte through a mapped probe buffer: "" where this rank read it, else what failed.
std::string probe(MPI_Comm comm, int rank) {
  constexpr unsigned char kMark = 0x5A;
  void* p = nullptr;
  std::string err;
  Header h;
  cudaError_t e = cudaSetDevice(0);
  if (e != cudaSuccess) err = cuda_text(e, "cudaSetDevice");
  if (rank == 0 && err.empty()) {
    if ((e = cudaMalloc(&p, 1 << 20)) != cudaSuccess) err = cuda_text(e, "cudaMalloc");
    else if ((e = cudaMemset(p, kMark, 1)) != cudaSuccess) err = cuda_text(e, "cudaMemset");
    else if ((e = cudaIpcGetMemHandle(&h.handle, p)) != cudaSuccess) err = cuda_text(e, "cudaIpcGetMemHandle");
    else if ((e = cudaDeviceSynchronize()) != cudaSuccess) err = cuda_text(e, "cudaDeviceSynchronize");
    h.bytes = err.empty() ? 1 : 0;
  }
  mpi_broadcast_bytes(comm, &h, sizeof h);
  if (rank != 0 && err.empty()) {
    unsigned char got = 0;
    if (h.bytes == 0) err = "the learner could not export a buffer";
    else if ((e = cudaIpcOpenMemHandle(&p, h.handle, cudaIpcMemLazyEnablePeerAccess)) != cudaSuccess)
      err = cuda_text(e, "cudaIpcOpenMemHandle");
    else if ((e = cudaMemcpy(&got, p, 1, cudaMemcpyDeviceToHost)) != cudaSuccess) err = cuda_text(e, "cudaMemcpy");
    else if (got != kMark) err = "the learner's buffer read back wrong";
    if (p) cudaIpcCloseMemHandle(p);
  }
  MPI_Barrier(comm);  // every rank is done with the probe buffer before the learner frees it
  if (rank == 0 && p) cudaFree(p);
  return err;
}

}  // namespace

std::unique_ptr<WeightChannel> make_ipc_weight_channel(MPI_Comm comm, std::string* why) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::string err = probe(comm, rank);
  // The lowest failing rank tells every rank its reason.
  int failing = err.empty() ? INT_MAX : rank, first = INT_MAX;
  MPI_Allreduce(&failing, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == INT_MAX) return std::make_unique<IpcWeightChannel>(comm);
  uint64_t n = rank == first ? err.size() : 0;
  MPI_Bcast(&n, sizeof n, MPI_BYTE, first, comm);
  std::string text = rank == first ? err : std::string(n, '\0');
  MPI_Bcast(text.data(), static_cast<int>(n), MPI_BYTE, first, comm);
  if (why) *why = "rank " + std::to_string(first) + " of the weight broadcast: " + text;
  return nullptr;
}

}  // namespace leap
