// Run under a real `mpirun -np 3`: the MPI channel's named-tensor broadcast, with buckets smaller
// than one tensor, spanning several, and holding all of them. Every rank checks that its bytes are
// the root's and that its checksum and bucket count agree; exit code 0 on every rank means so.
// `--ipc`: the CUDA IPC channel with the tensors in device memory of the one GPU all ranks share
// (the buckets growing, so the learner's buffer is replaced and mapped again).
#include <mpi.h>

#include <cstring>
#include <iostream>
#ifdef LEAP_HAVE_CUDA_IPC
#include <cuda_runtime.h>
#endif

#include "common/error.h"
#include "common/mpi_bootstrap.h"
#include "common/mpi_weight_channel.h"

namespace {

// Device copies of the tensors' bytes (--ipc), or none.
struct OnDevice {
  bool on = false;
  std::vector<void*> ptrs;
#ifdef LEAP_HAVE_CUDA_IPC
  void ok(cudaError_t e) {
    if (e != cudaSuccess) throw leap::LeapError(cudaGetErrorString(e));
  }
  void put(std::vector<leap::WeightTensor>& ts, std::vector<std::vector<uint8_t>>& storage) {
    for (size_t i = 0; i < ts.size(); ++i) {
      void* p = nullptr;
      ok(cudaMalloc(&p, storage[i].size()));
      ok(cudaMemcpy(p, storage[i].data(), storage[i].size(), cudaMemcpyHostToDevice));
      ptrs.push_back(p);
      ts[i].data = p;
      ts[i].device = true;
    }
  }
  void get(std::vector<leap::WeightTensor>& ts, std::vector<std::vector<uint8_t>>& storage) {
    for (size_t i = 0; i < ts.size(); ++i) {
      ok(cudaMemcpy(storage[i].data(), ptrs[i], storage[i].size(), cudaMemcpyDeviceToHost));
      cudaFree(ptrs[i]);
      ts[i].data = storage[i].data();
      ts[i].device = false;
    }
    ptrs.clear();
  }
#else
  void put(std::vector<leap::WeightTensor>&, std::vector<std::vector<uint8_t>>&) {}
  void get(std::vector<leap::WeightTensor>&, std::vector<std::vector<uint8_t>>&) {}
#endif
};

bool have_gpu() {
#ifdef LEAP_HAVE_CUDA_IPC
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, status = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  OnDevice dev;
  dev.on = argc > 1 && std::strcmp(argv[1], "--ipc") == 0;
  if (dev.on && !have_gpu()) {
    // No GPU: the probe declines on every rank alike, with one reason, and the run goes over MPI.
    std::string why;
    const bool none = leap::make_ipc_weight_channel(MPI_COMM_WORLD, &why) == nullptr;
    const auto all = leap::allgather_strings(MPI_COMM_WORLD, (none ? "none: " : "made: ") + why);
    for (const auto& w : all)
      if (w != all[0] || !none || why.empty()) status = 1;
    if (rank == 0) {
      if (status) for (const auto& w : all) std::cerr << "rank's answer: " << w << "\n";
      else std::cout << "skipped: no GPU (every rank's probe declined: " << why << ")\n";
    }
    MPI_Finalize();
    return status;
  }
  try {
    std::unique_ptr<leap::WeightChannel> ch;
    if (dev.on) {
      std::string why;
      ch = leap::make_ipc_weight_channel(MPI_COMM_WORLD, &why);
      if (!ch) throw leap::LeapError("no CUDA IPC channel: " + why);
    } else {
      ch = leap::make_mpi_weight_channel(MPI_COMM_WORLD);
    }
    const std::vector<size_t> sizes = {3 << 20, 14, 4000, 8};  // bytes: f32 768Kx1, bf16 7, f16 2000, f32 2
    const std::vector<leap::WeightDtype> dtypes = {leap::WeightDtype::f32, leap::WeightDtype::bf16,
                                                   leap::WeightDtype::f16, leap::WeightDtype::f32};
    const std::vector<size_t> buckets = dev.on ? std::vector<size_t>{1000, size_t{1} << 20, 0, size_t{64} << 20}
                                               : std::vector<size_t>{0, 1000, size_t{1} << 20, size_t{64} << 20};
    for (size_t bucket : buckets) {
      std::vector<std::vector<uint8_t>> storage;
      std::vector<leap::WeightTensor> ts;
      for (size_t i = 0; i < sizes.size(); ++i) storage.emplace_back(sizes[i], uint8_t{0});
      for (size_t i = 0; i < sizes.size(); ++i)
        ts.push_back({"t" + std::to_string(i), dtypes[i], {static_cast<int64_t>(sizes[i] / leap::dtype_bytes(dtypes[i]))},
                      storage[i].data(), sizes[i], false});
      auto expected = storage;
      uint32_t seed = static_cast<uint32_t>(bucket) + 7;
      for (auto& s : expected)
        for (auto& b : s) b = static_cast<uint8_t>((seed = seed * 1103515245u + 12345u) >> 16);
      if (rank == 0) storage = expected;
      for (size_t i = 0; i < ts.size(); ++i) ts[i].data = storage[i].data();
      if (dev.on) dev.put(ts, storage);
      auto st = ch->broadcast_tensors(ts, rank == 0, bucket);
      if (dev.on) dev.get(ts, storage);
      if (storage != expected) throw leap::LeapError("bytes differ from the root's with bucket " + std::to_string(bucket));
      if (st.buckets != leap::bucket_plan(ts, bucket).size()) throw leap::LeapError("bucket count");
      std::string sum = leap::tensors_checksum(ts);
      std::vector<char> root_sum(sum.begin(), sum.end());
      MPI_Bcast(root_sum.data(), static_cast<int>(root_sum.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
      if (std::string(root_sum.begin(), root_sum.end()) != sum) throw leap::LeapError("checksum differs");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) std::cout << "weight broadcast ok: 4 bucket sizes, 3 ranks, over " << ch->kind() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "rank " << rank << ": " << e.what() << "\n";
    status = 1;
  }
  MPI_Finalize();
  return status;
}
