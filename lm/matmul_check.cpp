#include "lm/matmul_check.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>

#ifdef LEAP_TORCH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "common/error.h"

namespace leap::lm {

namespace {

// bf16 rounds each output to 2^-9 of itself: Freivalds' row error of a right product stays near
// 1e-3 of the row's norm and a sampled entry's within 4e-3 of the largest. A wrong product is off
// by its own magnitude (0.76-0.96 of it on the H200 under MPS shares).
constexpr double kAllowed = 0.03;

// A generator of its own: the check draws the same inputs every time and leaves the process's
// default generators (a run's sampling and initialisation) where they were.
at::Generator generator([[maybe_unused]] torch::Device device, uint64_t seed) {
#ifdef LEAP_TORCH_CUDA
  if (device.is_cuda()) {
    auto g = at::make_generator<at::CUDAGeneratorImpl>(device.has_index() ? device.index() : c10::cuda::current_device());
    g.set_current_seed(seed);
    return g;
  }
#endif
  return at::detail::createCPUGenerator(seed);
}

// max over rows i and probe vectors of |(C v)_i - (A (B v))_i| / (|C_i| + |(A (B v))_i|), in fp64,
// a block of rows at a time (a product's fp64 copy would be four times its size). Batched
// products ([n, m, k] x [n, k, p], attention's) a block of batch entries at a time.
double freivalds(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c, at::Generator& gen,
                 int64_t block_entries) {
  auto v = torch::randn({c.size(-1), 2}, gen, c.options().dtype(torch::kDouble));
  // Blocks of about `block_entries` entries (2^26: 512 MB in fp64), whatever the shape (a 7B head's weight is 4 GB).
  auto per_block = [&](int64_t width) { return std::max<int64_t>(1, block_entries / std::max<int64_t>(1, width)); };
  auto row_errors = [](const torch::Tensor& cb, const torch::Tensor& lhs, const torch::Tensor& rhs) {
    auto scale = cb.norm(2, {cb.dim() - 1}, true) + rhs.abs() + 1e-30;
    return ((lhs - rhs).abs() / scale).max().item<double>();
  };
  double worst = 0;
  if (c.dim() == 3) {
    const int64_t n = c.size(0), step = per_block(c.size(1) * std::max({a.size(2), c.size(2)}) + b.size(1) * b.size(2));
    for (int64_t i = 0; i < n; i += step) {
      const int64_t nb = std::min(step, n - i);
      auto vb = v.unsqueeze(0).expand({nb, v.size(0), 2});
      auto rhs = a.narrow(0, i, nb).to(torch::kDouble).bmm(b.narrow(0, i, nb).to(torch::kDouble).bmm(vb));
      auto cb = c.narrow(0, i, nb).to(torch::kDouble);
      worst = std::max(worst, row_errors(cb, cb.bmm(vb), rhs));
    }
    return worst;
  }
  std::vector<torch::Tensor> bv_parts;
  for (int64_t r = 0, n = per_block(b.size(1)); r < b.size(0); r += n)
    bv_parts.push_back(b.narrow(0, r, std::min(n, b.size(0) - r)).to(torch::kDouble).mm(v));
  auto bv = torch::cat(bv_parts);
  const int64_t block = per_block(std::max(a.size(1), c.size(1)));
  for (int64_t r = 0; r < c.size(0); r += block) {
    const int64_t n = std::min(block, c.size(0) - r);
    auto cb = c.narrow(0, r, n).to(torch::kDouble);
    worst = std::max(worst, row_errors(cb, cb.mm(v), a.narrow(0, r, n).to(torch::kDouble).mm(bv)));
  }
  return worst;
}

// A few rows and columns of C against the CPU's fp32 product of the same (rounded) inputs (of two
// batch entries, for a batched product).
double sampled(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c, at::Generator& cpu_gen) {
  if (c.dim() == 3) {
    double worst = 0;
    for (int64_t i : {int64_t{0}, c.size(0) - 1})
      worst = std::max(worst, sampled(a[i], b[i], c[i], cpu_gen));
    return worst;
  }
  auto rows = torch::randint(c.size(0), {std::min<int64_t>(4, c.size(0))}, cpu_gen, torch::kLong);
  auto cols = torch::randint(c.size(1), {std::min<int64_t>(64, c.size(1))}, cpu_gen, torch::kLong);
  auto ref = a.index_select(0, rows.to(a.device())).to(torch::kCPU, torch::kFloat)
                 .mm(b.index_select(1, cols.to(b.device())).to(torch::kCPU, torch::kFloat));
  auto got = c.index_select(0, rows.to(c.device())).index_select(1, cols.to(c.device())).to(torch::kCPU, torch::kFloat);
  return (got - ref).abs().max().item<double>() / std::max(1e-30, ref.abs().max().item<double>());
}

void release_cached_memory() {
#ifdef LEAP_TORCH_CUDA
  c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

std::string mps_share() {
  const char* s = std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  return s && *s ? s : "";
}

}  // namespace

std::vector<MatmulCheck> check_matmuls(const ModelConfig& c, torch::Device device, torch::ScalarType dtype,
                                       const MatmulShapes& shapes, const MatmulFn& mm_in, int64_t block_entries) {
  const MatmulFn mm = mm_in ? mm_in : MatmulFn([](const torch::Tensor& x, const torch::Tensor& y) { return at::matmul(x, y); });
  auto gen = generator(device, 0x1ea9);
  auto cpu_gen = at::detail::createCPUGenerator(0x1ea9);
  const auto opts = torch::TensorOptions().device(device).dtype(dtype);
  std::vector<MatmulCheck> done;
  auto check = [&](const char* form, const torch::Tensor& a, const torch::Tensor& b) {
    auto prod = mm(a, b);
    const bool batched = a.dim() == 3;
    MatmulCheck r{form, batched ? a.size(0) : 1, a.size(-2), a.size(-1), b.size(-1),
                  freivalds(a, b, prod, gen, block_entries), sampled(a, b, prod, cpu_gen)};
    if (!(r.row_err <= kAllowed) || !(r.sample_err <= kAllowed)) {
      const std::string n = batched ? std::to_string(r.batch) + " x " : "";
      std::ostringstream msg;
      msg << "the device's matrix products are wrong at this model's shapes: " << device.str() << " "
          << c10::toString(dtype) << " " << form << " [" << n << r.m << " x " << r.k << "] x [" << n << r.k << " x "
          << r.n << "] is off by " << std::max(r.row_err, r.sample_err) * 100 << " % of its magnitude (allowed "
          << kAllowed * 100 << " %)";
      if (!mps_share().empty())
        msg << ", under an MPS share of the SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" << mps_share()
            << "): cuBLAS has computed wrong products under some shares (40, 60, 75 and 80 % of an H200's; "
               "docs/lm.md); choose another share or none";
      throw LeapError(msg.str());
    }
    done.push_back(r);
  };
  const int64_t H = c.hidden, D = c.head_dim, q = c.heads * D, kv = c.kv_heads * D;
  // (in, out) of each projection: q, k and v, o, gate and up, down, the head.
  std::set<std::pair<int64_t, int64_t>> projections = {{H, q}, {H, kv}, {q, H}, {H, c.intermediate}, {c.intermediate, H}, {H, c.vocab}};
  // A size the device has no memory for is left out and said so (`skipped`): a model may fit
  // where the check's largest products do not (a 7B model on a 24 GB card).
  auto sized = [&](const char* what, const std::function<void()>& f) {
    try {
      f();
    } catch (const c10::Error& e) {
      if (std::string(e.what()).find("out of memory") == std::string::npos) throw;
      MatmulCheck r;
      r.form = what;
      r.skipped = true;
      done.push_back(r);
      release_cached_memory();
    }
  };
  for (const auto& [in, out] : projections)
    for (int64_t m : shapes.rows)
      sized("a projection's products", [&, in = in, out = out, m = m] {
        auto x = torch::randn({m, in}, gen, opts);
        auto w = torch::randn({out, in}, gen, opts);
        auto dy = torch::randn({m, out}, gen, opts);
        // The three products autograd makes of a linear layer, as it lays them out.
        check("x w^T", x, w.t());
        check("dy w", dy, w);
        check("dy^T x", dy.t(), x);
      });
  // Attention against a KV cache (generation; training's attention is one fused kernel): each KV
  // head's G query heads stacked against it, for a decode step (one token) and a prompt's prefill.
  const int64_t G = c.heads / std::max<int64_t>(1, c.kv_heads), n = shapes.sequences * c.kv_heads, L = shapes.cache;
  for (int64_t t : {int64_t{1}, shapes.prompt})
    sized("attention's products", [&, t = t] {
      auto qg = torch::randn({n, G * t, D}, gen, opts);
      auto k = torch::randn({n, L, D}, gen, opts);
      auto probs = torch::rand({n, G * t, L}, gen, opts);  // non-negative, as attention's weights
      auto v = torch::randn({n, L, D}, gen, opts);
      check("q k^T", qg, k.transpose(-2, -1));
      check("p v", probs, v);
    });
  return done;
}

void check_device_matmuls_once(const ModelConfig& c, torch::Device device, torch::ScalarType dtype) {
  if (!device.is_cuda()) return;
  static std::mutex mu;
  static std::set<std::tuple<std::string, int, std::vector<int64_t>>> checked;
  const std::tuple<std::string, int, std::vector<int64_t>> key{
      device.str(), static_cast<int>(dtype), {c.hidden, c.heads * c.head_dim, c.kv_heads * c.head_dim, c.intermediate, c.vocab}};
  std::lock_guard<std::mutex> lock(mu);
  if (checked.count(key)) return;
  torch::NoGradGuard no_grad;
  const auto done = check_matmuls(c, device, dtype, MatmulShapes{});
  release_cached_memory();  // the check's gigabytes go back to the device, unfragmented
  const auto skipped = std::count_if(done.begin(), done.end(), [](const MatmulCheck& r) { return r.skipped; });
  if (skipped)
    std::cerr << "leap: warning: " << skipped << " size(s) of the device's matrix products were not checked: not "
              << "enough free memory on " << device.str() << " for them\n";
  checked.insert(key);
}

}  // namespace leap::lm
