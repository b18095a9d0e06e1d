#include "judge/device/judge_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "judge/device/input_values.h"

namespace leap::gpu {
namespace {

// LibTorch's work in the judge runs on the legacy default stream; these kernels queue behind it.
constexpr cudaStream_t kStream = nullptr;
constexpr int kThreads = 256;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("judge kernel: ") + what + ": " + cudaGetErrorString(e));
}

int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

__device__ float g_quantiles[inputs::kQuantiles];

void upload_quantiles() {
  // One judge process serves one device.
  static std::once_flag once;
  std::call_once(once, [] {
    check(cudaMemcpyToSymbol(g_quantiles, inputs::normal_quantiles().data(), sizeof(float) * inputs::kQuantiles),
          "upload the normal quantiles");
  });
}

template <class T>
__device__ T narrow(double x);
template <>
__device__ float narrow<float>(double x) {
  float v = static_cast<float>(x);
  return v == 0.0f ? 1e-3f : v;
}
template <>
__device__ double narrow<double>(double x) {
  return x == 0.0 ? 1e-3 : x;
}
template <>
__device__ __half narrow<__half>(double x) {
  __half h = __float2half_rn(narrow<float>(x));  // through float32, as the host path narrows
  return __heq(h, __float2half_rn(0.0f)) ? __float2half_rn(1e-3f) : h;
}
template <>
__device__ __nv_bfloat16 narrow<__nv_bfloat16>(double x) {
  __nv_bfloat16 h = __float2bfloat16_rn(narrow<float>(x));
  return __bfloat162float(h) == 0.0f ? __float2bfloat16_rn(1e-3f) : h;
}

template <class T>
__global__ void fill_kernel(T* a_out, T* b_out, int64_t n, uint64_t base, int kind, double a, double b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    T v = narrow<T>(inputs::value_at(base, i, static_cast<inputs::Kind>(kind), a, b, g_quantiles));
    a_out[i] = v;
    if (b_out) b_out[i] = v;
  }
}

// One reduction's result: a count, the lowest index, two non-negative maxima (as bit patterns,
// which order like the doubles they hold).
struct Acc {
  unsigned long long count, first, max_abs, max_rel;
};

struct Scratch {
  Acc* dev = nullptr;
  Acc* host = nullptr;
  double* pair_dev = nullptr;
  double* pair_host = nullptr;
  Scratch() {
    check(cudaMalloc(&dev, sizeof(Acc)), "cudaMalloc");
    check(cudaMallocHost(&host, sizeof(Acc)), "cudaMallocHost");
    check(cudaMalloc(&pair_dev, 2 * sizeof(double)), "cudaMalloc");
    check(cudaMallocHost(&pair_host, 2 * sizeof(double)), "cudaMallocHost");
  }
  // The judge is one thread: its calls never overlap.
  void reset() {
    *host = Acc{0, ~0ull, 0, 0};
    check(cudaMemcpyAsync(dev, host, sizeof(Acc), cudaMemcpyHostToDevice, kStream), "reset");
  }
  Acc read() {
    check(cudaMemcpyAsync(host, dev, sizeof(Acc), cudaMemcpyDeviceToHost, kStream), "read back");
    check(cudaStreamSynchronize(kStream), "synchronise");
    return *host;
  }
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

__device__ unsigned long long bits_of(double x) { return static_cast<unsigned long long>(__double_as_longlong(x)); }

__device__ void warp_commit(Acc* out, unsigned long long count, unsigned long long first, double max_abs,
                            double max_rel) {
  for (int off = 16; off > 0; off >>= 1) {
    count += __shfl_down_sync(0xffffffffu, count, off);
    first = min(first, __shfl_down_sync(0xffffffffu, first, off));
    max_abs = fmax(max_abs, __shfl_down_sync(0xffffffffu, max_abs, off));
    max_rel = fmax(max_rel, __shfl_down_sync(0xffffffffu, max_rel, off));
  }
  if ((threadIdx.x & 31) != 0) return;
  if (count) {
    atomicAdd(&out->count, count);
    atomicMin(&out->first, first);
  }
  if (max_abs > 0) atomicMax(&out->max_abs, bits_of(max_abs));
  if (max_rel > 0) atomicMax(&out->max_rel, bits_of(max_rel));
}

template <class W>
__global__ void pattern_kernel(const W* p, W pattern, int64_t n, Acc* out) {
  unsigned long long count = 0, first = ~0ull;
  // Every thread of a warp runs the same number of rounds, so the shuffles below see all lanes.
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i0 = blockIdx.x * int64_t(blockDim.x); i0 < n; i0 += stride) {
    int64_t i = i0 + threadIdx.x;
    if (i < n && p[i] == pattern) {
      ++count;
      first = min(first, static_cast<unsigned long long>(i));
    }
  }
  warp_commit(out, count, first, 0, 0);
}

template <class T>
__device__ double wide(T x) {
  return static_cast<double>(x);
}
template <>
__device__ double wide<__half>(__half x) {
  return __half2float(x);
}
template <>
__device__ double wide<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <class T>
__global__ void compare_kernel(const T* got, const T* want, int64_t n, double atol, double rtol, Acc* out) {
  unsigned long long count = 0, first = ~0ull;
  double max_abs = 0, max_rel = 0;
  const double floor = atol > 0 ? atol : 1e-12;  // tiny references are judged by atol
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i0 = blockIdx.x * int64_t(blockDim.x); i0 < n; i0 += stride) {
    int64_t i = i0 + threadIdx.x;
    if (i >= n) continue;
    double o = wide(got[i]), r = wide(want[i]);
    if (isnan(o) && isnan(r)) continue;
    double diff = fabs(o - r);
    bool ok = (isinf(o) || isinf(r)) ? o == r  // rtol * inf would accept anything
                                     : !isnan(diff) && diff <= atol + rtol * fabs(r);
    double d = isnan(diff) ? INFINITY : diff;
    max_abs = fmax(max_abs, d);
    double rel = d / fmax(fabs(r), floor);
    if (!isnan(rel)) max_rel = fmax(max_rel, rel);
    if (!ok) {
      ++count;
      first = min(first, static_cast<unsigned long long>(i));
    }
  }
  warp_commit(out, count, first, max_abs, max_rel);
}

template <class T>
__global__ void pair_kernel(const T* got, const T* want, int64_t i, double* out) {
  out[0] = wide(got[i]);
  out[1] = wide(want[i]);
}

template <class F>
void by_elem(Elem e, F&& f) {
  switch (e) {
    case Elem::f32: return f(float{});
    case Elem::f64: return f(double{});
    case Elem::f16: return f(__half{});
    case Elem::bf16: return f(__nv_bfloat16{});
  }
  throw std::invalid_argument("judge kernel: unknown element type");
}

}  // namespace

void fill_inputs(void* a_out, void* b_out, Elem e, int64_t n, uint64_t seed, int kind, double a, double b) {
  if (n <= 0) return;
  upload_quantiles();
  by_elem(e, [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<blocks_for(n), kThreads, 0, kStream>>>(static_cast<T*>(a_out), static_cast<T*>(b_out), n,
                                                            inputs::hash64(seed), kind, a, b);
  });
  check(cudaGetLastError(), "fill inputs");
}

int64_t count_pattern(const void* p, int bytes, uint64_t pattern, int64_t n, int64_t* first) {
  Scratch& s = scratch();
  s.reset();
  int g = blocks_for(n);
  if (bytes == 2)
    pattern_kernel<<<g, kThreads, 0, kStream>>>(static_cast<const uint16_t*>(p), uint16_t(pattern), n, s.dev);
  else if (bytes == 4)
    pattern_kernel<<<g, kThreads, 0, kStream>>>(static_cast<const uint32_t*>(p), uint32_t(pattern), n, s.dev);
  else if (bytes == 8)
    pattern_kernel<<<g, kThreads, 0, kStream>>>(static_cast<const uint64_t*>(p), uint64_t(pattern), n, s.dev);
  else throw std::invalid_argument("judge kernel: no pattern scan for " + std::to_string(bytes) + "-byte elements");
  check(cudaGetLastError(), "scan for the poison");
  Acc r = s.read();
  *first = r.count ? static_cast<int64_t>(r.first) : -1;
  return static_cast<int64_t>(r.count);
}

Compared compare(const void* out, const void* ref, Elem e, int64_t n, double atol, double rtol) {
  Scratch& s = scratch();
  s.reset();
  Compared c;
  by_elem(e, [&](auto tag) {
    using T = decltype(tag);
    auto* o = static_cast<const T*>(out);
    auto* r = static_cast<const T*>(ref);
    compare_kernel<T><<<blocks_for(n), kThreads, 0, kStream>>>(o, r, n, atol, rtol, s.dev);
    check(cudaGetLastError(), "compare");
    Acc a = s.read();
    c.mismatches = static_cast<int64_t>(a.count);
    std::memcpy(&c.max_abs, &a.max_abs, sizeof c.max_abs);
    std::memcpy(&c.max_rel, &a.max_rel, sizeof c.max_rel);
    if (!a.count) return;
    c.first_bad = static_cast<int64_t>(a.first);
    pair_kernel<T><<<1, 1, 0, kStream>>>(o, r, c.first_bad, s.pair_dev);
    check(cudaMemcpyAsync(s.pair_host, s.pair_dev, 2 * sizeof(double), cudaMemcpyDeviceToHost, kStream), "read back");
    check(cudaStreamSynchronize(kStream), "synchronise");
    c.out_at_first = s.pair_host[0];
    c.ref_at_first = s.pair_host[1];
  });
  return c;
}

}  // namespace leap::gpu
