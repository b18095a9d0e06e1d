#include "judge/check/comparison.h"

#include <cmath>
#include <sstream>

namespace leap {

namespace {

template <typename T>
Comparison compare(const T* out, const T* ref, int64_t n, Tolerance tol) {
  Comparison c;
  for (int64_t i = 0; i < n; ++i) {
    double o = out[i], r = ref[i];
    bool both_nan = std::isnan(o) && std::isnan(r);
    double diff = std::fabs(o - r);
    bool ok;
    if (both_nan) ok = true;
    else if (std::isinf(o) || std::isinf(r)) ok = o == r;  // rtol * inf would accept anything
    else ok = !std::isnan(diff) && diff <= tol.atol + tol.rtol * std::fabs(r);
    if (!both_nan) {
      double d = std::isnan(diff) ? INFINITY : diff;
      if (d > c.max_abs) c.max_abs = d;
      // Relative to the magnitude that matters: tiny references are judged by atol.
      double rel = d / std::max(std::fabs(r), tol.atol > 0 ? tol.atol : 1e-12);
      if (rel > c.max_rel) c.max_rel = rel;
    }
    if (!ok) {
      if (c.first_bad < 0) {
        c.first_bad = i;
        c.out_at_first = o;
        c.ref_at_first = r;
      }
      ++c.mismatches;
    }
  }
  c.passed = c.mismatches == 0;
  return c;
}

}  // namespace

Tolerance at_magnitude(Tolerance tol, double rms) {
  if (std::isfinite(rms) && rms > 0 && rms < 1) tol.atol *= rms;
  return tol;
}

Comparison compare_values(const double* out, const double* ref, int64_t n, Tolerance tol) {
  return compare(out, ref, n, tol);
}

Comparison compare_values(const float* out, const float* ref, int64_t n, Tolerance tol) {
  return compare(out, ref, n, tol);
}

std::string describe_mismatch(const Comparison& c, const std::vector<int64_t>& shape, Tolerance tol,
                              const std::string& tensor) {
  std::ostringstream s;
  int64_t numel = 1;
  for (auto d : shape) numel *= d;
  s << "output '" << tensor << "' mismatch: " << c.mismatches << " of " << numel
    << " elements outside tolerance (atol=" << tol.atol << ", rtol=" << tol.rtol << ")";
  if (c.first_bad >= 0) {
    s << "; first at index [";
    int64_t rem = c.first_bad;
    std::vector<int64_t> idx(shape.size());
    for (size_t k = shape.size(); k-- > 0;) {
      idx[k] = rem % shape[k];
      rem /= shape[k];
    }
    for (size_t k = 0; k < idx.size(); ++k) s << (k ? ", " : "") << idx[k];
    s << "] (flat " << c.first_bad << "): got " << c.out_at_first << ", expected " << c.ref_at_first;
  }
  s << "; max abs error " << c.max_abs << ", max rel error " << c.max_rel;
  return s.str();
}

}  // namespace leap
