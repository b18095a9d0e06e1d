// leap-profile: the process Nsight Compute profiles for [eval] profile (judge/device/profiler.cpp starts
// it, under ncu, in a sandbox of its own, after the candidate's verdict). It loads the candidate's
// library, gives it fresh inputs of the task's shapes, calls it once to warm up and once inside
// the profiler's range (cudaProfilerStart/Stop: ncu --profile-from-start off sees that call only).
// Candidate code runs here: this process holds nothing of the judge's.
// Usage: leap-profile --library PATH --in DTYPE:D0,D1,..:KIND:A:B ... --out DTYPE:D0,.. ... [--seed N]
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <leap/candidate.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using KernelFn = int (*)(const DLTensor*, int, DLTensor*, int, void*);

[[noreturn]] void die(const std::string& why, int code = 2) {
  std::fprintf(stderr, "leap-profile: %s\n", why.c_str());
  std::exit(code);
}

struct Tensor {
  std::string dtype, kind = "normal";
  std::vector<int64_t> shape;
  double a = 0, b = 1;
  void* data = nullptr;
  DLTensor dl{};
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

Tensor parse_tensor(const std::string& spec) {
  auto f = split(spec, ':');
  if (f.size() != 2 && f.size() != 5) die("bad tensor '" + spec + "'");
  Tensor t;
  t.dtype = f[0];
  for (const auto& d : split(f[1], ','))
    if (!d.empty()) t.shape.push_back(std::stoll(d));
  if (f.size() == 5) {
    t.kind = f[2];
    t.a = std::stod(f[3]);
    t.b = std::stod(f[4]);
  }
  return t;
}

DLDataType dl_type(const std::string& d) {
  if (d == "f32") return {kDLFloat, 32, 1};
  if (d == "f64") return {kDLFloat, 64, 1};
  if (d == "f16") return {kDLFloat, 16, 1};
  if (d == "bf16") return {kDLBfloat, 16, 1};
  if (d == "i32") return {kDLInt, 32, 1};
  if (d == "i64") return {kDLInt, 64, 1};
  die("unknown dtype " + d);
}

// Values as the judge draws them (judge/check/tensors.cpp): normal(a, b), uniform [a, b), positive
// |normal| + 1e-3; integers in [1, 100).
std::vector<char> host_values(const Tensor& t, size_t n, std::mt19937_64& rng) {
  const DLDataType type = dl_type(t.dtype);
  std::vector<char> bytes(n * type.bits / 8);
  std::normal_distribution<double> normal(t.a, t.b > 0 ? t.b : 1);
  std::uniform_real_distribution<double> uniform(t.a, t.b > t.a ? t.b : t.a + 1);
  std::uniform_int_distribution<int64_t> integer(1, 99);
  for (size_t i = 0; i < n; ++i) {
    double v = t.kind == "uniform" ? uniform(rng) : normal(rng);
    if (t.kind == "positive") v = std::fabs(v) + 1e-3;
    if (t.dtype == "f32") reinterpret_cast<float*>(bytes.data())[i] = static_cast<float>(v);
    else if (t.dtype == "f64") reinterpret_cast<double*>(bytes.data())[i] = v;
    else if (t.dtype == "f16") reinterpret_cast<__half*>(bytes.data())[i] = __float2half(static_cast<float>(v));
    else if (t.dtype == "bf16") reinterpret_cast<__nv_bfloat16*>(bytes.data())[i] = __float2bfloat16(static_cast<float>(v));
    else if (t.dtype == "i32") reinterpret_cast<int32_t*>(bytes.data())[i] = static_cast<int32_t>(integer(rng));
    else reinterpret_cast<int64_t*>(bytes.data())[i] = integer(rng);
  }
  return bytes;
}

void allocate(Tensor& t, bool input, std::mt19937_64& rng) {
  size_t n = 1;
  for (int64_t d : t.shape) n *= static_cast<size_t>(d);
  const DLDataType type = dl_type(t.dtype);
  const size_t bytes = n * type.bits / 8;
  if (cudaMalloc(&t.data, bytes ? bytes : 1) != cudaSuccess) die("cudaMalloc failed");
  if (input) {
    auto host = host_values(t, n, rng);
    if (cudaMemcpy(t.data, host.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess) die("cudaMemcpy failed");
  } else {
    cudaMemset(t.data, 0xff, bytes);  // NaN patterns, as the judge poisons outputs
  }
  t.dl.data = t.data;
  t.dl.device = {kDLCUDA, 0};
  t.dl.ndim = static_cast<int32_t>(t.shape.size());
  t.dl.dtype = type;
  t.dl.shape = t.shape.data();
}

}  // namespace

int main(int argc, char** argv) {
  std::string library;
  std::vector<Tensor> ins, outs;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) die("missing value after " + a);
    const std::string v = argv[++i];
    if (a == "--library") library = v;
    else if (a == "--in") ins.push_back(parse_tensor(v));
    else if (a == "--out") outs.push_back(parse_tensor(v));
    else if (a == "--seed") seed = std::stoull(v);
    else die("unknown option " + a);
  }
  if (library.empty() || outs.empty()) die("usage: leap-profile --library PATH --in SPEC ... --out SPEC ...");
  std::mt19937_64 rng(seed);
  for (auto& t : ins) allocate(t, true, rng);
  for (auto& t : outs) allocate(t, false, rng);
  std::vector<DLTensor> in_dl, out_dl;
  for (auto& t : ins) in_dl.push_back(t.dl);
  for (auto& t : outs) out_dl.push_back(t.dl);
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) die(std::string("dlopen: ") + dlerror());
  auto kernel = reinterpret_cast<KernelFn>(dlsym(handle, "leap_kernel"));
  if (!kernel) die("no leap_kernel in the library");
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) die("cudaStreamCreate failed");
  for (int call = 0; call < 2; ++call) {
    if (call == 1) cudaProfilerStart();
    const int rc = kernel(in_dl.data(), static_cast<int>(in_dl.size()), out_dl.data(), static_cast<int>(out_dl.size()), stream);
    const cudaError_t err = cudaDeviceSynchronize();
    if (call == 1) cudaProfilerStop();
    if (rc != 0) die("leap_kernel returned " + std::to_string(rc), 3);
    if (err != cudaSuccess) die(std::string("CUDA error: ") + cudaGetErrorString(err), 3);
  }
  std::printf("leap-profile: 2 calls done\n");
  return 0;
}
