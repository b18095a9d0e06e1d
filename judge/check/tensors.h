// Tensors of one evaluation in the evaluator: seeded inputs that are never zero, outputs
// poisoned with a NaN bit pattern no computation produces, and their DLPack element types.
#pragma once
#include <ATen/ATen.h>
#include <dlpack/dlpack.h>

#include <cstdint>
#include <vector>

#include "proto/leap.capnp.h"

namespace leap {

at::ScalarType scalar_type(proto::DType d);

class Device;

// Fresh random tensor for a spec in a plain allocation of `dev`; deterministic in `seed`.
at::Tensor make_input(Device& dev, proto::TensorSpec::Reader spec, uint64_t seed);
// Fills `t` in place with fresh random values (same buffer, new contents).
void refill_input(at::Tensor& t, proto::TensorSpec::Reader spec, uint64_t seed);
// The same fresh values into the judge's pristine copy and the candidate's input buffer.
void fill_inputs(at::Tensor& pristine, at::Tensor& input, proto::TensorSpec::Reader spec, uint64_t seed);
at::Tensor make_poisoned_output(Device& dev, proto::TensorSpec::Reader spec);
void poison(at::Tensor& t);
// Elements still holding the poison pattern; first such flat index in *first (or -1).
int64_t count_poisoned(const at::Tensor& t, int64_t* first);
bool bitwise_equal(const at::Tensor& a, const at::Tensor& b);
// Tolerance check on any device, by the rule of compare_values: CPU tensors through it; device
// tensors of one floating type through the judge's compare kernel (float64, one pass), others
// through compare_with_tensor_ops (the same rule as tensor operations).
struct Comparison;
struct Tolerance;
Comparison compare_tensors(const at::Tensor& got, const at::Tensor& want, Tolerance tol);
Comparison compare_with_tensor_ops(const at::Tensor& got, const at::Tensor& want, Tolerance tol);
// Root mean square of a reference's finite elements, in float64 on its device (at_magnitude).
double magnitude(const at::Tensor& ref);

// The DLPack type of a tensor's elements (what the candidate is told, through the runner).
DLDataType dl_dtype(const at::Tensor& t);

uint64_t mix_seed(uint64_t a, uint64_t b);

}  // namespace leap
