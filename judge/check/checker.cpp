#include "judge/check/checker.h"

#include "common/error.h"
#include "common/outcome_proto.h"
#include "judge/check/comparison.h"
#include "judge/check/tensors.h"
#include "tasks/task_proto.h"

namespace leap {
namespace {

constexpr uint64_t kAlign = 256;
// Verified outputs kept to recognise a replay; one set when memory allows a single slot.
size_t history(size_t slots) { return slots > 1 ? 4 : 1; }

uint64_t bytes_of(proto::TensorSpec::Reader spec) {
  uint64_t n = at::elementSize(scalar_type(spec.getDtype()));
  for (auto d : spec.getShape()) n *= static_cast<uint64_t>(d);
  return std::max<uint64_t>(n, 1);
}

std::vector<int64_t> shape_of(proto::TensorSpec::Reader spec) {
  std::vector<int64_t> s;
  for (auto d : spec.getShape()) s.push_back(d);
  return s;
}

bool replayed(const std::vector<at::Tensor>& now, const std::vector<at::Tensor>& before) {
  if (before.size() != now.size()) return false;
  for (size_t i = 0; i < now.size(); ++i)
    if (!bitwise_equal(now[i], before[i])) return false;
  return true;
}

}  // namespace

Checker::Checker(proto::TaskRef::Reader task, Device& dev, EvalOutcome& o) : task_(task), dev_(dev), o_(o) {
  for (auto p : task_.getParams()) params_.emplace_back(p.getName(), p.getValue());
  if (task_.getArchive().size() > 0) {
    module_ = ModuleReference::load(task_.getArchive(), dev_.torch_device());
    for (auto spec : task_.getInputs()) {
      at::Tensor p;
      if (spec.getParameter().size() > 0) {
        p = module_->parameter(spec.getParameter());
        if (p.sizes() != at::IntArrayRef(shape_of(spec)) || p.scalar_type() != scalar_type(spec.getDtype()))
          throw LeapError(std::string("the module's '") + spec.getParameter().cStr() + "' does not match input '" +
                          spec.getName().cStr() + "' of the task");
      }
      module_params_.push_back(p);
    }
    return;
  }
  ref_ = find_reference(task_.getReference());
  if (!ref_) throw LeapError("unknown reference implementation '" + std::string(task_.getReference().cStr()) + "'");
}

std::vector<at::Tensor> Checker::reference(const Slots::Slot& s) {
  if (!module_) return ref_(s.pristine, params_);
  std::vector<at::Tensor> args;  // the forward's inputs; the module holds its own parameters
  for (size_t i = 0; i < s.pristine.size(); ++i)
    if (!module_params_[i].defined()) args.push_back(s.pristine[i]);
  return module_->forward(args);
}

std::pair<size_t, size_t> fit_slots(size_t n, size_t k, size_t free, size_t own,
                                    const std::function<uint64_t(size_t, size_t)>& bytes) {
  if (free == 0) return {n, k};
  const double budget = 0.5 * static_cast<double>(free + own);
  while (1.25 * static_cast<double>(bytes(n, k)) > budget) {
    if (n > 2) n = 2;
    else if (k > 0) k /= 2;
    else if (n > 1) n = 1;
    else break;  // allocated as it is: a task too large for the device fails there, clearly
  }
  return {n, k};
}

uint64_t Checker::bytes_for(size_t n, size_t keep_capacity) const {
  uint64_t in = 0, out = 0;
  for (auto t : task_.getInputs()) in += (bytes_of(t) + kAlign - 1) / kAlign * kAlign;
  for (auto t : task_.getOutputs()) out += (bytes_of(t) + kAlign - 1) / kAlign * kAlign;
  return n * (2 * in + out) + (keep_capacity + 1) * out + (history(n) + 1) * out;
}

Slots Checker::make_slots(size_t n, Workspace& ws, std::shared_ptr<Arena>& arena, size_t keep_capacity) {
  Slots s;
  replay_history_ = history(n);
  std::vector<proto::TensorSpec::Reader> specs;
  for (auto t : task_.getInputs()) specs.push_back(t);
  for (auto t : task_.getOutputs()) specs.push_back(t);
  if (specs.size() > static_cast<size_t>(runner::kMaxTensors)) throw LeapError("too many tensors for the runner");
  const size_t n_in = task_.getInputs().size();
  uint64_t in_bytes = 0, out_bytes = 0;  // one set of each, aligned
  for (size_t i = 0; i < specs.size(); ++i) {
    uint64_t b = (bytes_of(specs[i]) + kAlign - 1) / kAlign * kAlign;
    s.offsets.push_back(s.slot_bytes);
    s.slot_bytes += b;
    (i < n_in ? in_bytes : out_bytes) += b;
  }
  arena = ws.arena(n * s.slot_bytes);
  // Private memory: pristine inputs per slot, then the kept output sets.
  char* priv = ws.scratch(n * in_bytes + (keep_capacity + 1) * out_bytes);
  auto carve = [&](proto::TensorSpec::Reader spec) {
    auto t = at::from_blob(priv, shape_of(spec),
                           at::TensorOptions().dtype(scalar_type(spec.getDtype())).device(dev_.torch_device()));
    priv += (bytes_of(spec) + kAlign - 1) / kAlign * kAlign;
    return t;
  };
  for (size_t k = 0; k < n; ++k) {
    Slots::Slot slot;
    for (size_t i = 0; i < specs.size(); ++i) {
      auto t = dev_.view(*arena, k * s.slot_bytes + s.offsets[i], shape_of(specs[i]), scalar_type(specs[i].getDtype()));
      if (i < n_in) {
        slot.inputs.push_back(t);
        slot.pristine.push_back(carve(specs[i]));
      } else {
        slot.outputs.push_back(t);
      }
    }
    s.slots.push_back(std::move(slot));
  }
  s.kept.assign(keep_capacity + 1, {});
  for (auto& k : s.kept)
    for (auto spec : task_.getOutputs()) k.push_back(carve(spec));
  return s;
}

void Checker::keep(Slots& all, const Slots::Slot& s, uint64_t seed, uint32_t call, std::mt19937_64& rng) {
  const size_t capacity = all.kept.size() - 1;
  if (kept_.size() != all.kept.size()) kept_.assign(all.kept.size(), KeptCall{});
  copy_out(all, s);
  auto& newest = all.kept.back();
  kept_.back() = {seed, call};
  ++seen_;
  // Reservoir sampling: the n-th call replaces a random kept one with probability capacity / n.
  size_t j = capacity;
  if (filled_ < capacity) j = filled_++;
  else if (size_t r = std::uniform_int_distribution<size_t>(0, seen_ - 1)(rng); r < capacity) j = r;
  if (j < capacity) {
    std::swap(all.kept[j], newest);
    std::swap(kept_[j], kept_.back());
  }
}

void Checker::copy_out(Slots& all, const Slots::Slot& s) {
  auto& newest = all.kept.back();
  for (size_t i = 0; i < s.outputs.size(); ++i) newest[i].copy_(s.outputs[i]);
}

bool Checker::verify_kept(Slots& all) {
  Slots::Slot& scratch = all[0];
  for (size_t k = 0; k < filled_; ++k) {
    unsigned i = 0;
    for (auto spec : task_.getInputs()) {
      refill_input(scratch.pristine[i], spec, mix_seed(kept_[k].seed, i));
      ++i;
    }
    std::string report;
    if (!outputs_correct(scratch, all.kept[k], &report))
      return wrong(all.kept[k], false, Check::timed_call_wrong, kept_[k].call, report);
  }
  return true;
}

runner::Command Checker::load_command(const Slots& s) const {
  runner::Command c;
  c.op = runner::Op::load;
  c.slots = static_cast<uint32_t>(s.size());
  c.slot_bytes = s.slot_bytes;
  c.n_in = task_.getInputs().size();
  c.n_out = task_.getOutputs().size();
  const auto& first = s.slots.at(0);
  size_t i = 0;
  for (const auto* list : {&first.inputs, &first.outputs}) {
    for (const auto& t : *list) {
      runner::TensorDesc& d = c.tensors[i];
      if (t.dim() > runner::kMaxDims) throw LeapError("tensor rank above the runner's limit");
      d.offset = s.offsets[i];
      d.ndim = static_cast<int32_t>(t.dim());
      for (int64_t k = 0; k < t.dim(); ++k) d.shape[k] = t.size(k);
      DLDataType type = dl_dtype(t);
      d.code = type.code;
      d.bits = type.bits;
      ++i;
    }
  }
  return c;
}

void Checker::fill(Slots::Slot& s, uint64_t seed) {
  unsigned i = 0;
  for (auto spec : task_.getInputs()) {
    if (module_ && module_params_[i].defined()) {  // the module's own values, every call
      s.pristine[i].copy_(module_params_[i]);
      s.inputs[i].copy_(module_params_[i]);
    } else {
      fill_inputs(s.pristine[i], s.inputs[i], spec, mix_seed(seed, i));
    }
    ++i;
  }
  for (auto& t : s.outputs) poison(t);
}

bool Checker::fail(Status s, Check check, const std::string& feedback) {
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

bool Checker::all_written(Slots::Slot& s, bool first) {
  auto specs = task_.getOutputs();
  for (unsigned i = 0; i < s.outputs.size(); ++i) {
    int64_t at = -1;
    int64_t n = count_poisoned(s.outputs[i], &at);
    if (n == 0) continue;
    if (n == s.outputs[i].numel() && !first)
      return fail(Status::cheat_detected, Check::skipped_work,
                  "call " + std::to_string(o_.calls) + " wrote nothing into output '" + specs[i].getName().cStr() +
                      "' although earlier calls did: work skipped for some calls");
    return fail(Status::cheat_detected, Check::partial_write,
                std::to_string(n) + " of " + std::to_string(s.outputs[i].numel()) + " elements of output '" +
                    specs[i].getName().cStr() + "' were not written by call " + std::to_string(o_.calls) +
                    " (first at flat index " + std::to_string(at) + ")");
  }
  return true;
}

bool Checker::verify(Slots::Slot& s, bool trial, Check wrong_check) {
  auto in_specs = task_.getInputs();
  for (unsigned i = 0; i < s.inputs.size(); ++i)
    if (!bitwise_equal(s.inputs[i], s.pristine[i]))
      return fail(
          Status::cheat_detected, Check::input_mutation,
          "input '" + std::string(in_specs[i].getName().cStr()) + "' was modified by call " + std::to_string(o_.calls));
  std::string report;
  if (!outputs_correct(s, s.outputs, &report)) return wrong(s.outputs, trial, wrong_check, o_.calls, report);
  std::vector<at::Tensor> copy;
  for (auto& t : s.outputs) copy.push_back(t.clone());
  previous_.push_back(std::move(copy));
  if (previous_.size() > replay_history_) previous_.pop_front();
  return true;
}

bool Checker::wrong(const std::vector<at::Tensor>& outputs, bool trial, Check wrong_check, uint32_t call,
                    const std::string& report) {
  bool replay = false;
  for (const auto& before : previous_) replay = replay || replayed(outputs, before);
  if (replay)
    return fail(Status::cheat_detected, Check::output_reuse,
                "the outputs of call " + std::to_string(call) +
                    " are identical to an earlier call's although the inputs changed; " + report);
  if (trial)
    return fail(Status::wrong_answer, Check::none, "trial " + std::to_string(o_.trials.back().index) + ": " + report);
  if (timed_calls_carry_trials_)
    return fail(Status::wrong_answer, Check::none,
                "call " + std::to_string(call) + " (a timed call, verified at random) was wrong; with " +
                    std::to_string(o_.trial_calls) + " trials before timing (a candidate clearly slower than its " +
                    "reference), the verified timed calls carried the rest of the correctness check: " + report);
  return fail(Status::cheat_detected, wrong_check,
              "call " + std::to_string(call) + " (a timed call, verified at random) was wrong although the " +
                  "correctness trials passed: work skipped or outputs forged while timed; " + report);
}

bool Checker::outputs_correct(const Slots::Slot& s, const std::vector<at::Tensor>& outputs, std::string* report) {
  std::vector<at::Tensor> refs = reference(s);
  if (refs.size() != outputs.size()) throw LeapError("reference returned the wrong number of outputs");
  auto out_specs = task_.getOutputs();
  TrialResult trial;
  trial.index = static_cast<uint32_t>(o_.trials.size());
  trial.passed = true;
  for (unsigned i = 0; i < outputs.size(); ++i) {
    if (outputs[i].sizes() != refs[i].sizes()) throw LeapError("reference output shape differs from task.toml");
    Tolerance tol = at_magnitude(tolerance_for(out_specs[i].getDtype()), magnitude(refs[i]));
    Comparison c = compare_tensors(outputs[i], refs[i], tol);
    trial.max_abs_error = std::max(trial.max_abs_error, c.max_abs);
    trial.max_rel_error = std::max(trial.max_rel_error, c.max_rel);
    if (!c.passed && trial.passed) {
      trial.passed = false;
      trial.first_bad_index = c.first_bad;
      trial.mismatches = c.mismatches;
      std::vector<int64_t> shape(outputs[i].sizes().begin(), outputs[i].sizes().end());
      *report = describe_mismatch(c, shape, tol, out_specs[i].getName().cStr());
    }
  }
  o_.trials.push_back(trial);
  return trial.passed;
}

}  // namespace leap
