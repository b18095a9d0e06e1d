// The judge's own CUDA kernels for the work it does around every candidate call: fresh inputs,
// the poison scan, the tolerance check. One pass and at most one synchronisation each, where the
// same work in LibTorch ops takes a dozen kernels, float64 temporaries of every output and
// several host round trips. Plain pointers, no LibTorch: tensors.cpp adapts.
#pragma once
#include <cstdint>

namespace leap::gpu {

enum class Elem : int { f32 = 0, f64 = 1, f16 = 2, bf16 = 3 };

// Writes the input stream of (seed, kind, a, b) into `a_out` and, if not null, the same values
// into `b_out`: never zero after narrowing (inputs_values.h has the stream).
void fill_inputs(void* a_out, void* b_out, Elem e, int64_t n, uint64_t seed, int kind, double a, double b);

// Elements of `bytes`-wide words equal to `pattern`; the first one's index in *first (or -1).
int64_t count_pattern(const void* p, int bytes, uint64_t pattern, int64_t n, int64_t* first);

struct Compared {
  int64_t mismatches = 0;
  int64_t first_bad = -1;
  double max_abs = 0, max_rel = 0;
  double out_at_first = 0, ref_at_first = 0;
};

// The tolerance rule of compare_values (judge/check/comparison.h), evaluated in float64.
Compared compare(const void* out, const void* ref, Elem e, int64_t n, double atol, double rtol);

}  // namespace leap::gpu
