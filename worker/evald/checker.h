// Checked calls of a loaded candidate: fresh inputs, poisoned outputs, and after the call
// the anti-hacking checks (stray threads, input mutation, partial writes, replayed outputs)
// and the tolerance comparison against the LibTorch reference.
#pragma once
#include <ATen/ATen.h>
#include <dlpack/dlpack.h>

#include <string>
#include <vector>

#include "proto/leap.capnp.h"
#include "tasks/references.h"
#include "worker/evald/device.h"
#include "worker/outcome.h"

namespace leap {

using KernelFn = int (*)(const DLTensor*, int, DLTensor*, int, void*);

struct Buffers {
  std::vector<at::Tensor> inputs, pristine, outputs;
};

class Checker {
 public:
  Checker(proto::TaskRef::Reader task, KernelFn fn, ReferenceFn ref, Device& dev, EvalOutcome& o);

  Buffers fresh(uint64_t seed);
  void refill(Buffers& b, uint64_t seed);  // same buffers, new contents, outputs poisoned
  // The raw call (no checks); an exception escaping the candidate becomes an error code.
  int call(Buffers& b, std::string* what);
  // One checked call. `previous` holds outputs the candidate could replay; `reuse_check`
  // names the cheat when it does. Returns false with the outcome filled on any failure.
  bool check(Buffers& b, const std::vector<at::Tensor>* previous, const char* reuse_check);
  // Compares outputs already in `b` with the reference of its pristine inputs.
  bool outputs_correct(Buffers& b, std::string* report);
  std::vector<at::Tensor> reference(const Buffers& b) { return ref_(b.pristine, params_); }
  bool fail(Status s, const std::string& check, const std::string& feedback);

  static std::string call_error(int rc, const std::string& what);

 private:
  Tolerance tolerance_for(proto::DType d) const;

  proto::TaskRef::Reader task_;
  KernelFn fn_;
  ReferenceFn ref_;
  Device& dev_;
  EvalOutcome& o_;
  Params params_;
};

}  // namespace leap
