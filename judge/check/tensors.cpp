#include "judge/check/tensors.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "judge/check/comparison.h"
#include "judge/device/device.h"
#include "judge/device/input_values.h"
#ifdef LEAP_HAVE_CUDA
#include "judge/device/judge_kernels.h"
#endif

namespace leap {

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

at::ScalarType scalar_type(proto::DType d) {
  switch (d) {
    case proto::DType::FLOAT32: return at::kFloat;
    case proto::DType::FLOAT64: return at::kDouble;
    case proto::DType::FLOAT16: return at::kHalf;
    case proto::DType::BFLOAT16: return at::kBFloat16;
    case proto::DType::INT32: return at::kInt;
    case proto::DType::INT64: return at::kLong;
  }
  throw std::invalid_argument("unknown dtype");
}

namespace {

std::vector<int64_t> shape_of(proto::TensorSpec::Reader spec) {
  std::vector<int64_t> s;
  for (auto d : spec.getShape()) s.push_back(d);
  return s;
}

inputs::Kind kind_of(proto::TensorSpec::Reader spec) {
  std::string k = spec.getDistribution().getKind();
  return k == "uniform" ? inputs::Kind::uniform : k == "positive" ? inputs::Kind::positive : inputs::Kind::normal;
}

template <class T>
void fill_host(T* out, int64_t n, uint64_t seed, inputs::Kind kind, double a, double b) {
  const float* q = inputs::normal_quantiles().data();
  const uint64_t base = inputs::hash64(seed);
  for (int64_t i = 0; i < n; ++i) {
    T v = static_cast<T>(inputs::value_at(base, i, kind, a, b, q));
    out[i] = v == T(0) ? T(1e-3) : v;  // zeros hide unwritten or skipped work
  }
}

#ifdef LEAP_HAVE_CUDA
// The judge's kernels take the floating types in place on the device; others go through LibTorch.
std::optional<gpu::Elem> kernel_elem(const at::Tensor& t) {
  if (!t.is_cuda() || !t.is_contiguous()) return std::nullopt;
  switch (t.scalar_type()) {
    case at::kFloat: return gpu::Elem::f32;
    case at::kDouble: return gpu::Elem::f64;
    case at::kHalf: return gpu::Elem::f16;
    case at::kBFloat16: return gpu::Elem::bf16;
    default: return std::nullopt;
  }
}

// The input stream of `spec` into `t` (and the same values into `copy`, if given) on the device,
// in one pass; false where the kernel does not take the tensors.
bool fill_on_device(at::Tensor& t, at::Tensor* copy, proto::TensorSpec::Reader spec, uint64_t seed) {
  auto e = kernel_elem(t);
  if (!e || (copy && (kernel_elem(*copy) != e || copy->numel() != t.numel()))) return false;
  auto dist = spec.getDistribution();
  gpu::fill_inputs(t.data_ptr(), copy ? copy->data_ptr() : nullptr, *e, t.numel(), seed,
                   static_cast<int>(kind_of(spec)), dist.getA(), dist.getB());
  return true;
}
#endif

at::Tensor sample(proto::TensorSpec::Reader spec, uint64_t seed, at::Device device) {
  auto shape = shape_of(spec);
  auto type = scalar_type(spec.getDtype());
  auto dist = spec.getDistribution();
  std::string kind = dist.getKind();
  if (!device.is_cuda()) {
    if (type == at::kInt || type == at::kLong) {
      auto x = at::empty(shape, at::TensorOptions().dtype(at::kLong));
      auto* p = x.data_ptr<int64_t>();
      uint64_t base = inputs::hash64(seed);
      for (int64_t i = 0; i < x.numel(); ++i)
        p[i] = 1 + static_cast<int64_t>(inputs::hash64(base + static_cast<uint64_t>(i)) % 99);
      return x.to(type);
    }
    auto x = at::empty(shape, at::TensorOptions().dtype(type == at::kDouble ? at::kDouble : at::kFloat));
    if (type == at::kDouble) fill_host(x.data_ptr<double>(), x.numel(), seed, kind_of(spec), dist.getA(), dist.getB());
    else fill_host(x.data_ptr<float>(), x.numel(), seed, kind_of(spec), dist.getA(), dist.getB());
    if (x.scalar_type() == type) return x;
    x = x.to(type);
    return x.masked_fill_(x == 0, 1e-3);  // narrower types round tiny values to zero
  }
  // Generating on the GPU: KernelBench-sized inputs would take seconds on one CPU core.
  if (type == at::kInt || type == at::kLong) {
    at::Generator gen = at::globalContext().defaultGenerator(device);
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_current_seed(seed);
    }
    return at::randint(1, 100, shape, gen, at::TensorOptions().dtype(type).device(device));
  }
  auto x = at::empty(shape, at::TensorOptions().dtype(type).device(device));
  refill_input(x, spec, seed);
  return x;
}

template <typename T>
void put_pattern(T v, unsigned char* out, size_t* size) {
  std::memcpy(out, &v, sizeof v);
  *size = sizeof v;
}

// A NaN whose payload no arithmetic produces (signalling, quieted by any operation).
void poison_pattern(at::ScalarType t, unsigned char* out, size_t* size) {
  switch (t) {
    case at::kFloat: return put_pattern<uint32_t>(0x7FA5A5A5u, out, size);
    case at::kDouble: return put_pattern<uint64_t>(0x7FF4A5A5A5A5A5A5ull, out, size);
    case at::kHalf: return put_pattern<uint16_t>(0x7D5Au, out, size);
    case at::kBFloat16: return put_pattern<uint16_t>(0x7FA5u, out, size);
    case at::kInt: return put_pattern<uint32_t>(0xA5A5A5A5u, out, size);
    case at::kLong: return put_pattern<uint64_t>(0xA5A5A5A5A5A5A5A5ull, out, size);
    default: throw std::invalid_argument("no poison pattern for dtype");
  }
}

// Same-size integer view, for bitwise work with tensor ops on the GPU.
at::ScalarType bits_type(size_t n) { return n == 2 ? at::kShort : n == 4 ? at::kInt : at::kLong; }

int64_t pattern_value(const unsigned char* pat, size_t n) {
  if (n == 2) {
    int16_t v;
    std::memcpy(&v, pat, 2);
    return v;
  }
  if (n == 4) {
    int32_t v;
    std::memcpy(&v, pat, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, pat, 8);
  return v;
}

}  // namespace

at::Tensor make_input(Device& dev, proto::TensorSpec::Reader spec, uint64_t seed) {
  auto t = dev.alloc(shape_of(spec), scalar_type(spec.getDtype()));
  t.copy_(sample(spec, seed, t.device()));
  return t;
}

void refill_input(at::Tensor& t, proto::TensorSpec::Reader spec, uint64_t seed) {
#ifdef LEAP_HAVE_CUDA
  if (fill_on_device(t, nullptr, spec, seed)) return;  // the same values the host computes
#endif
  auto st = t.scalar_type();
  auto dist = spec.getDistribution();
  if (!t.is_cuda() && t.is_contiguous() && (st == at::kFloat || st == at::kDouble)) {
    if (st == at::kFloat) fill_host(t.data_ptr<float>(), t.numel(), seed, kind_of(spec), dist.getA(), dist.getB());
    else fill_host(t.data_ptr<double>(), t.numel(), seed, kind_of(spec), dist.getA(), dist.getB());
    return;
  }
  t.copy_(sample(spec, seed, t.device()));
}

void fill_inputs(at::Tensor& pristine, at::Tensor& input, proto::TensorSpec::Reader spec, uint64_t seed) {
#ifdef LEAP_HAVE_CUDA
  if (fill_on_device(pristine, &input, spec, seed)) return;  // both written by one pass
#endif
  refill_input(pristine, spec, seed);
  input.copy_(pristine);
}

at::Tensor make_poisoned_output(Device& dev, proto::TensorSpec::Reader spec) {
  auto t = dev.alloc(shape_of(spec), scalar_type(spec.getDtype()));
  poison(t);
  return t;
}

void poison(at::Tensor& t) {
  unsigned char pat[8];
  size_t n = 0;
  poison_pattern(t.scalar_type(), pat, &n);
  if (t.is_cuda()) {
    t.view(bits_type(n)).fill_(pattern_value(pat, n));
    return;
  }
  auto* p = static_cast<unsigned char*>(t.data_ptr());
  for (int64_t i = 0; i < t.numel(); ++i) std::memcpy(p + i * n, pat, n);
}

int64_t count_poisoned(const at::Tensor& t, int64_t* first) {
  unsigned char pat[8];
  size_t n = 0;
  poison_pattern(t.scalar_type(), pat, &n);
#ifdef LEAP_HAVE_CUDA
  if (t.is_cuda() && t.is_contiguous()) {
    uint64_t word = 0;
    std::memcpy(&word, pat, n);
    return gpu::count_pattern(t.data_ptr(), static_cast<int>(n), word, t.numel(), first);
  }
#endif
  if (t.is_cuda()) {
    auto hit = (t.view(bits_type(n)) == pattern_value(pat, n)).flatten();
    int64_t count = hit.sum().item<int64_t>();
    *first = count ? hit.nonzero()[0][0].item<int64_t>() : -1;
    return count;
  }
  const auto* p = static_cast<const unsigned char*>(t.data_ptr());
  int64_t count = 0;
  *first = -1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (std::memcmp(p + i * n, pat, n) == 0) {
      if (*first < 0) *first = i;
      ++count;
    }
  }
  return count;
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.is_cuda() || b.is_cuda()) {
    if (a.numel() != b.numel() || a.element_size() != b.element_size()) return false;
    auto bt = bits_type(static_cast<size_t>(a.element_size()));
    return at::equal(a.view(bt), b.view(bt));
  }
  return a.numel() == b.numel() && a.element_size() == b.element_size() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<size_t>(a.numel()) * a.element_size()) == 0;
}

Comparison compare_tensors(const at::Tensor& got_in, const at::Tensor& want_in, Tolerance tol) {
#ifdef LEAP_HAVE_CUDA
  auto e = kernel_elem(got_in);
  if (e && kernel_elem(want_in) == e && got_in.numel() == want_in.numel()) {
    auto g = gpu::compare(got_in.data_ptr(), want_in.data_ptr(), *e, got_in.numel(), tol.atol, tol.rtol);
    Comparison c;
    c.mismatches = g.mismatches;
    c.passed = g.mismatches == 0;
    c.first_bad = g.first_bad;
    c.max_abs = g.max_abs;
    c.max_rel = g.max_rel;
    c.out_at_first = g.out_at_first;
    c.ref_at_first = g.ref_at_first;
    return c;
  }
#endif
  if (got_in.is_cuda() || want_in.is_cuda()) return compare_with_tensor_ops(got_in, want_in, tol);
  auto as = got_in.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  auto got = got_in.to(as).contiguous();
  auto want = want_in.to(as).contiguous();
  return as == at::kDouble ? compare_values(got.data_ptr<double>(), want.data_ptr<double>(), got.numel(), tol)
                           : compare_values(got.data_ptr<float>(), want.data_ptr<float>(), got.numel(), tol);
}

double magnitude(const at::Tensor& ref) {
  if (!at::isFloatingType(ref.scalar_type()) || ref.numel() == 0) return 0;
  auto r = ref.to(at::kDouble);
  r = at::where(r.isfinite(), r, at::zeros_like(r));
  return std::sqrt((r * r).mean().item<double>());
}

Comparison compare_with_tensor_ops(const at::Tensor& got_in, const at::Tensor& want_in, Tolerance tol) {
  // In float64, as compare_values evaluates the rule: a float32 bound would round atol up.
  auto got = got_in.to(at::kDouble).flatten();
  auto want = want_in.to(at::kDouble).flatten();
  auto both_nan = got.isnan() & want.isnan();
  auto any_inf = got.isinf() | want.isinf();
  auto diff = (got - want).abs();
  auto within = diff <= (want.abs() * tol.rtol + tol.atol);  // NaN compares false
  auto ok = both_nan | at::where(any_inf, got == want, within);
  auto bad = ok.logical_not();
  Comparison c;
  c.mismatches = bad.sum().item<int64_t>();
  c.passed = c.mismatches == 0;
  auto d = at::where(both_nan, at::zeros_like(diff), at::where(diff.isnan(), at::full_like(diff, INFINITY), diff));
  c.max_abs = d.max().item<double>();
  c.max_rel = (d / want.abs().clamp_min(tol.atol > 0 ? tol.atol : 1e-12)).max().item<double>();
  if (!c.passed) {
    c.first_bad = bad.nonzero()[0][0].item<int64_t>();
    c.out_at_first = got[c.first_bad].item<double>();
    c.ref_at_first = want[c.first_bad].item<double>();
  }
  return c;
}

DLDataType dl_dtype(const at::Tensor& t) {
  auto st = t.scalar_type();
  uint8_t code = st == at::kInt || st == at::kLong ? kDLInt : st == at::kBFloat16 ? kDLBfloat : kDLFloat;
  return DLDataType{code, static_cast<uint8_t>(t.element_size() * 8), 1};
}

}  // namespace leap
