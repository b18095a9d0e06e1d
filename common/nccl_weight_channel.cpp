// NCCL broadcast of the flat weights: host -> device on the root, ncclBroadcast, device -> host.
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

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

 private:
  MPI_Comm comm_;
  ncclComm_t nccl_{};
  cudaStream_t stream_{};
  float* buf_ = nullptr;
  uint64_t cap_ = 0;
};

}  // namespace

std::unique_ptr<WeightChannel> make_nccl_weight_channel(MPI_Comm comm, int device) {
  return std::make_unique<NcclWeightChannel>(comm, device);
}
bool have_nccl() { return true; }

}  // namespace leap
