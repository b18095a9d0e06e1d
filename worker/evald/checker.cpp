#include "worker/evald/checker.h"

#include <dirent.h>

#include <fstream>

#include "common/clock.h"
#include "common/error.h"
#include "tasks/comparison.h"
#include "worker/evald/tensors.h"
#include "worker/outcome_proto.h"

namespace leap {
namespace {

constexpr int kEscapedException = -0x7EEE;

// Threads of this process, not counting the CUDA driver's own service threads.
int count_threads() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (auto* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string name;
      std::getline(comm, name);
      n += name.rfind("cuda-", 0) == 0 ? 0 : 1;
    }
    ::closedir(d);
  }
  return n;
}

bool replayed(const std::vector<at::Tensor>& now, const std::vector<at::Tensor>& before) {
  for (size_t i = 0; i < now.size(); ++i)
    if (!bitwise_equal(now[i], before[i])) return false;
  return true;
}

}  // namespace

Checker::Checker(proto::TaskRef::Reader task, KernelFn fn, ReferenceFn ref, Device& dev, EvalOutcome& o)
    : task_(task), fn_(fn), ref_(ref), dev_(dev), o_(o) {
  for (auto p : task_.getParams()) params_.emplace_back(p.getName(), p.getValue());
}

std::string Checker::call_error(int rc, const std::string& what) {
  if (rc == kEscapedException) return "an exception escaped leap_kernel: " + what;
  return "leap_kernel returned error code " + std::to_string(rc);
}

Buffers Checker::fresh(uint64_t seed) {
  Buffers b;
  unsigned i = 0;
  for (auto spec : task_.getInputs()) {
    b.inputs.push_back(make_input(dev_, spec, mix_seed(seed, i++)));
    b.pristine.push_back(b.inputs.back().clone());
  }
  for (auto spec : task_.getOutputs()) b.outputs.push_back(make_poisoned_output(dev_, spec));
  return b;
}

void Checker::refill(Buffers& b, uint64_t seed) {
  unsigned i = 0;
  for (auto spec : task_.getInputs()) {
    refill_input(b.inputs[i], spec, mix_seed(seed, i));
    b.pristine[i] = b.inputs[i].clone();
    ++i;
  }
  for (auto& t : b.outputs) poison(t);
}

int Checker::call(Buffers& b, std::string* what) {
  DlViews in(b.inputs), out(b.outputs);
  try {
    return fn_(in.data(), in.size(), out.data(), out.size(), dev_.stream());
  } catch (const std::exception& e) {
    *what = e.what();
  } catch (...) {
    *what = "unknown exception";
  }
  return kEscapedException;
}

bool Checker::fail(Status s, const std::string& check, const std::string& feedback) {
  o_.status = s;
  o_.check = check;
  o_.feedback = feedback;
  return false;
}

Tolerance Checker::tolerance_for(proto::DType d) const {
  for (auto t : task_.getTolerances())
    if (t.getDtype() == d) return {t.getAtol(), t.getRtol()};
  return default_tolerance(from_proto(d));
}

bool Checker::check(Buffers& b, const std::vector<at::Tensor>* previous, const char* reuse_check) {
  if (dev_.is_gpu()) {
    bool sticky = false;
    dev_.finish_call(&sticky);  // our own preparation must be complete before the call
  }
  int threads_before = count_threads();
  std::string what;
  auto t_call = Clock::now();
  int rc = call(b, &what);
  bool sticky = false;
  std::string device_error = dev_.finish_call(&sticky);
  o_.stages.candidate_calls_us += micros_since(t_call);
  int threads_after = count_threads();
  if (!device_error.empty()) {
    o_.recycle_evaluator = o_.recycle_evaluator || sticky;
    return fail(Status::runtime_error, "", device_error);
  }
  if (rc != 0) return fail(Status::runtime_error, "", call_error(rc, what));
  if (threads_after > threads_before) {
    o_.recycle_evaluator = true;
    return fail(Status::cheat_detected, "threads_left_running",
                std::to_string(threads_after - threads_before) +
                    " thread(s) the candidate started were still running after leap_kernel returned");
  }
  auto in_specs = task_.getInputs();
  for (unsigned i = 0; i < b.inputs.size(); ++i)
    if (!bitwise_equal(b.inputs[i], b.pristine[i]))
      return fail(Status::cheat_detected, "input_mutation",
                  "input '" + std::string(in_specs[i].getName().cStr()) + "' was modified by the call");
  auto out_specs = task_.getOutputs();
  for (unsigned i = 0; i < b.outputs.size(); ++i) {
    int64_t first = -1;
    int64_t n = count_poisoned(b.outputs[i], &first);
    if (n > 0 && n == b.outputs[i].numel() && previous && std::string(reuse_check) == "pointer_cache")
      return fail(Status::cheat_detected, reuse_check,
                  "nothing was written: the call skipped its work for buffers it had seen before");
    if (n > 0)
      return fail(Status::cheat_detected, "partial_write",
                  std::to_string(n) + " of " + std::to_string(b.outputs[i].numel()) + " elements of output '" +
                      out_specs[i].getName().cStr() + "' were not written (first at flat index " +
                      std::to_string(first) + ")");
  }
  std::string report;
  bool ok = outputs_correct(b, &report);
  if (ok) return true;
  if (previous && replayed(b.outputs, *previous))
    return fail(Status::cheat_detected, reuse_check,
                "the outputs of this call are identical to an earlier call's although the inputs changed; " + report);
  return fail(Status::wrong_answer, "", "trial " + std::to_string(o_.trials.back().index) + ": " + report);
}

bool Checker::outputs_correct(Buffers& b, std::string* report) {
  std::vector<at::Tensor> refs = reference(b);
  if (refs.size() != b.outputs.size()) throw LeapError("reference returned the wrong number of outputs");
  auto out_specs = task_.getOutputs();
  TrialResult trial;
  trial.index = static_cast<uint32_t>(o_.trials.size());
  trial.passed = true;
  for (unsigned i = 0; i < b.outputs.size(); ++i) {
    if (b.outputs[i].sizes() != refs[i].sizes()) throw LeapError("reference output shape differs from task.toml");
    Tolerance tol = tolerance_for(out_specs[i].getDtype());
    Comparison c = compare_tensors(b.outputs[i], refs[i], tol);
    trial.max_abs_error = std::max(trial.max_abs_error, c.max_abs);
    trial.max_rel_error = std::max(trial.max_rel_error, c.max_rel);
    if (!c.passed && trial.passed) {
      trial.passed = false;
      trial.first_bad_index = c.first_bad;
      trial.mismatches = c.mismatches;
      std::vector<int64_t> shape(b.outputs[i].sizes().begin(), b.outputs[i].sizes().end());
      *report = describe_mismatch(c, shape, tol, out_specs[i].getName().cStr());
    }
  }
  o_.trials.push_back(trial);
  return trial.passed;
}

}  // namespace leap
