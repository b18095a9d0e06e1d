// leap-bench-broadcast (under mpirun): the learner's weight broadcast as named tensors in buckets,
// for Qwen2.5-0.5B/1.5B/7B-shaped models (the tensors' names and shapes, random bytes), beside one
// raw broadcast of the same bytes in one buffer in the same run: MPI on host memory (CPU), NCCL on
// device memory (`--device`, each rank its own GPU). Prints a table with the ratio to raw.
// `--shared-gpu`: every rank's tensors on the one GPU they share, through CUDA IPC, against the
// same named broadcast staged through the host over MPI (what ranks sharing a GPU used before).
//   mpirun -np 2 ./build/leap-bench-broadcast [--models 0.5b,1.5b] [--bucket-mb 16,64,256] [--device | --shared-gpu]
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/mpi_weight_channel.h"
#if defined(LEAP_HAVE_NCCL) || defined(LEAP_HAVE_CUDA_IPC)
#include <cuda_runtime.h>
#endif
#ifdef LEAP_HAVE_NCCL
#include <nccl.h>
#endif

namespace {

struct Shape {
  const char* name;
  int64_t hidden, layers, intermediate, heads, kv_heads, head_dim, vocab;
  bool tied;
};
// Qwen2.5 configs (config.json of the Hugging Face releases).
const Shape kShapes[] = {{"0.5b", 896, 24, 4864, 14, 2, 64, 151936, true},
                         {"1.5b", 1536, 28, 8960, 12, 2, 128, 151936, true},
                         {"7b", 3584, 28, 18944, 28, 4, 128, 152064, false}};

std::vector<std::pair<std::string, std::vector<int64_t>>> tensors_of(const Shape& s) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> t;
  const int64_t H = s.hidden, KV = s.kv_heads * s.head_dim, I = s.intermediate;
  t.push_back({"model.embed_tokens.weight", {s.vocab, H}});
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "input_layernorm.weight", {H}});
    t.push_back({p + "self_attn.q_proj.weight", {s.heads * s.head_dim, H}});
    t.push_back({p + "self_attn.q_proj.bias", {s.heads * s.head_dim}});
    t.push_back({p + "self_attn.k_proj.weight", {KV, H}});
    t.push_back({p + "self_attn.k_proj.bias", {KV}});
    t.push_back({p + "self_attn.v_proj.weight", {KV, H}});
    t.push_back({p + "self_attn.v_proj.bias", {KV}});
    t.push_back({p + "self_attn.o_proj.weight", {H, s.heads * s.head_dim}});
    t.push_back({p + "post_attention_layernorm.weight", {H}});
    t.push_back({p + "mlp.gate_proj.weight", {I, H}});
    t.push_back({p + "mlp.up_proj.weight", {I, H}});
    t.push_back({p + "mlp.down_proj.weight", {H, I}});
  }
  t.push_back({"model.norm.weight", {H}});
  if (!s.tied) t.push_back({"lm_head.weight", {s.vocab, H}});
  return t;
}

#ifdef LEAP_HAVE_CUDA_IPC
// Device memory to and from the host, for the MPI channel's staged broadcast.
struct CudaCopy : leap::DeviceCopy {
  void to_host(void* host, const void* dev, size_t n) const override { cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost); }
  void from_host(void* dev, const void* host, size_t n) const override { cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice); }
};
#endif

const Shape* shape_named(const std::string& m) {
  for (const auto& k : kShapes)
    if (m == k.name) return &k;
  throw leap::LeapError("unknown model '" + m + "' (0.5b, 1.5b, 7b)");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median of `repeats` collective runs of `once` between barriers, after an untimed one
// (connections, buffers).
template <class F>
double timed_ms(int repeats, F&& once) {
  once();
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    once();
    MPI_Barrier(MPI_COMM_WORLD);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(ms);
}

#ifdef LEAP_HAVE_CUDA_IPC
// --shared-gpu: every rank's tensors on GPU 0, through CUDA IPC and staged through the host over
// MPI, one row per model and bucket size.
void shared_gpu(int rank, int size, const std::vector<std::string>& models, const std::vector<std::string>& buckets,
                int repeats) {
  const CudaCopy copy;
  cudaSetDevice(0);
  std::string why;
  auto ipc = leap::make_ipc_weight_channel(MPI_COMM_WORLD, &why);
  if (!ipc) throw leap::LeapError("no CUDA IPC channel: " + why);
  auto mpi = leap::make_mpi_weight_channel(MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("Weight broadcast on one shared GPU: %d ranks, bfloat16 tensors in device memory, median of %d\n\n",
                size, repeats);
    std::printf("| model | parameters | GB | bucket MiB | buckets | CUDA IPC ms | IPC GB/s | via host (MPI) ms | "
                "host GB/s | host/IPC |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  for (const auto& m : models) {
    const Shape* s = shape_named(m);
    std::vector<leap::WeightTensor> ts;
    size_t total = 0;
    for (auto& [name, shape] : tensors_of(*s)) {
      size_t n = 2;
      for (auto d : shape) n *= static_cast<size_t>(d);
      void* p = nullptr;
      if (cudaMalloc(&p, n) != cudaSuccess) throw leap::LeapError("cudaMalloc " + name);
      cudaMemset(p, rank == 0 ? 0x3C : 0, n);
      ts.push_back({name, leap::WeightDtype::bf16, shape, p, n, true});
      total += n;
    }
    cudaDeviceSynchronize();
    auto timed = [&](auto&& once) { return timed_ms(repeats, once); };
    for (const auto& b : buckets) {
      const size_t bucket = std::stoul(b) << 20;
      size_t nb = 0;
      const double ipc_ms = timed([&] { nb = ipc->broadcast_tensors(ts, rank == 0, bucket).buckets; });
      const double host_ms = timed([&] { mpi->broadcast_staged(ts, rank == 0, bucket, copy); });
      // Every rank holds the learner's bytes: a sample of each tensor's first byte.
      for (const auto& t : ts) {
        unsigned char c = 0;
        cudaMemcpy(&c, t.data, 1, cudaMemcpyDeviceToHost);
        if (c != 0x3C) throw leap::LeapError("rank " + std::to_string(rank) + ": " + t.name + " was not broadcast");
      }
      if (rank == 0)
        std::printf("| %s | %.2fB | %.2f | %s | %zu | %.1f | %.1f | %.1f | %.1f | %.1f |\n", s->name, total / 2 / 1e9,
                    total / 1e9, b.c_str(), nb, ipc_ms, total / ipc_ms / 1e6, host_ms, total / host_ms / 1e6,
                    host_ms / ipc_ms);
    }
    for (const auto& t : ts) cudaFree(t.data);
  }
}
#endif

}  // namespace

// Long: every rank runs the same sequence of collectives; splitting it would hide that they match up.
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CLI::App app{"leap's named-tensor weight broadcast against one raw broadcast of the same bytes"};
  std::string models = "0.5b", buckets = "16,64,256";
  bool device = false, shared = false;
  int repeats = 5;
  app.add_option("--models", models, "comma-separated: 0.5b, 1.5b, 7b");
  app.add_option("--bucket-mb", buckets, "comma-separated bucket sizes in MiB");
  app.add_flag("--device", device, "device memory over NCCL (each rank its own GPU)");
  app.add_flag("--shared-gpu", shared, "device memory of one GPU shared by every rank: CUDA IPC against MPI through the host");
  app.add_option("--repeats", repeats, "timed broadcasts per row (median)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = rank == 0 ? app.exit(e) : 1;
    MPI_Finalize();
    return rc;
  }
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    for (std::string x; std::getline(in, x, ',');) out.push_back(x);
    return out;
  };
  int rc = 0;
  try {
    int gpu = 0;  // this rank's
#ifdef LEAP_HAVE_NCCL
    if (device) {
      int gpus = 0;
      cudaGetDeviceCount(&gpus);
      if (gpus == 0) throw leap::LeapError("--device: no GPU");
      gpu = rank % gpus;
      cudaSetDevice(gpu);
    }
#else
    if (device) throw leap::LeapError("--device needs a build with NCCL");
#endif
#ifdef LEAP_HAVE_CUDA_IPC
    if (shared) {
      if (device) throw leap::LeapError("--device or --shared-gpu, not both");
      shared_gpu(rank, size, split(models), split(buckets), repeats);
      MPI_Finalize();
      return 0;
    }
#else
    if (shared) throw leap::LeapError("--shared-gpu needs a build with CUDA");
#endif
    auto ch = device ? leap::make_nccl_weight_channel(MPI_COMM_WORLD, gpu) : leap::make_mpi_weight_channel(MPI_COMM_WORLD);
    if (!ch) throw leap::LeapError("no NCCL in this build");
    if (rank == 0) {
      std::printf("Weight broadcast: %d ranks, %s, bfloat16 tensors, median of %d\n\n", size,
                  device ? "device memory over NCCL" : "host memory over MPI", repeats);
      std::printf("| model | parameters | GB | bucket MiB | buckets | named ms | named GB/s | raw ms | raw GB/s | named/raw |\n");
      std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    std::vector<std::pair<std::string, double>> checksum_ms;
    for (const auto& m : split(models)) {
      const Shape* s = shape_named(m);
      std::vector<leap::WeightTensor> ts;
      std::vector<void*> blocks;
      size_t total = 0;
      std::mt19937 rng(7);
      for (auto& [name, shape] : tensors_of(*s)) {
        size_t n = 2;
        for (auto d : shape) n *= static_cast<size_t>(d);
        void* p = nullptr;
        std::vector<uint8_t> fill(n);
        if (rank == 0)
          for (size_t i = 0; i < n; i += 4096) fill[i] = static_cast<uint8_t>(rng());
#ifdef LEAP_HAVE_NCCL
        if (device) {
          if (cudaMalloc(&p, n) != cudaSuccess) throw leap::LeapError("cudaMalloc " + name);
          cudaMemcpy(p, fill.data(), n, cudaMemcpyHostToDevice);
        }
#endif
        if (!device) {
          p = std::malloc(n);
          std::copy(fill.begin(), fill.end(), static_cast<uint8_t*>(p));
        }
        blocks.push_back(p);
        ts.push_back({name, leap::WeightDtype::bf16, shape, p, n, device});
        total += n;
      }
      // The raw baseline: the same bytes in one buffer, one broadcast (chunked only by MPI's int counts).
      void* raw = nullptr;
#ifdef LEAP_HAVE_NCCL
      ncclComm_t nccl{};
      cudaStream_t stream{};
      if (device) {
        ncclUniqueId id;
        if (rank == 0) ncclGetUniqueId(&id);
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        ncclCommInitRank(&nccl, size, id, rank);
        cudaStreamCreate(&stream);
        if (cudaMalloc(&raw, total) != cudaSuccess) throw leap::LeapError("cudaMalloc raw");
      }
#endif
      if (!device) raw = std::calloc(total, 1);
      auto raw_once = [&] {
#ifdef LEAP_HAVE_NCCL
        if (device) {
          ncclBroadcast(raw, raw, total, ncclUint8, 0, nccl, stream);
          cudaStreamSynchronize(stream);
          return;
        }
#endif
        auto* p = static_cast<uint8_t*>(raw);
        for (size_t at = 0; at < total; at += INT32_MAX)
          MPI_Bcast(p + at, static_cast<int>(std::min<size_t>(INT32_MAX, total - at)), MPI_BYTE, 0, MPI_COMM_WORLD);
      };
      auto timed = [&](auto&& once) { return timed_ms(repeats, once); };
      const double raw_ms = timed(raw_once);
      for (const auto& b : split(buckets)) {
        const size_t bucket = std::stoul(b) << 20;
        size_t nb = 0;
        const double named_ms = timed([&] { nb = ch->broadcast_tensors(ts, rank == 0, bucket).buckets; });
        if (rank == 0)
          std::printf("| %s | %.2fB | %.2f | %s | %zu | %.1f | %.1f | %.1f | %.1f | %.2f |\n", s->name, total / 2 / 1e9,
                      total / 1e9, b.c_str(), nb, named_ms, total / named_ms / 1e6, raw_ms, total / raw_ms / 1e6,
                      raw_ms / named_ms);
      }
      if (!device) {  // what every rank's check of the broadcast costs on its own host bytes
        auto t0 = std::chrono::steady_clock::now();
        (void)leap::tensors_checksum(ts);
        checksum_ms.push_back({s->name, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()});
      }
      for (void* p : blocks) {
#ifdef LEAP_HAVE_NCCL
        if (device) {
          cudaFree(p);
          continue;
        }
#endif
        std::free(p);
      }
#ifdef LEAP_HAVE_NCCL
      if (device) {
        cudaFree(raw);
        ncclCommDestroy(nccl);
        cudaStreamDestroy(stream);
        raw = nullptr;
      }
#endif
      std::free(raw);
    }
    if (rank == 0)
      for (const auto& [name, ms] : checksum_ms)
        std::printf("%s checksum of the host bytes (BLAKE2b, one rank's): %.1f ms\n", name.c_str(), ms);
    if (rank == 0)
      std::printf("\nGB/s: bytes / time (a broadcast's bus bandwidth, as nccl-tests counts it). named/raw: the raw "
                  "broadcast's time over the named one's (1.00 = as fast as one flat buffer).\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
