// Tolerance checks of candidate outputs against reference outputs (plain arrays; the
// evaluator converts tensors to float64 first).
#pragma once
#include <cstdint>
#include <string>

#include "tasks/task.h"

namespace leap {

struct Comparison {
  bool passed = true;
  int64_t mismatches = 0;
  int64_t first_bad = -1;  // flat index of the first element outside tolerance
  double out_at_first = 0;
  double ref_at_first = 0;
  double max_abs = 0;  // over all elements
  double max_rel = 0;  // |out-ref| / max(|ref|, atol)
};

// The tolerance a reference of this magnitude (the root mean square of its finite elements) is
// held to: atol scaled down with the magnitude below 1, never up, so outputs far smaller than
// atol (softmax over many elements, a normalisation's output) are not passed by atol alone: an
// all-zero or constant answer fails. An all-zero reference keeps atol.
Tolerance at_magnitude(Tolerance tol, double rms);

// Element passes iff |out - ref| <= atol + rtol * |ref| (NaN never passes unless both NaN).
Comparison compare_values(const double* out, const double* ref, int64_t n, Tolerance tol);
Comparison compare_values(const float* out, const float* ref, int64_t n, Tolerance tol);

// "index 17 (row 0, col 17): got 1.5, expected 1.25; 3 of 4096 elements outside atol=..."
std::string describe_mismatch(const Comparison& c, const std::vector<int64_t>& shape, Tolerance tol,
                              const std::string& tensor);

}  // namespace leap
