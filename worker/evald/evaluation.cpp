#include "worker/evald/evaluation.h"

#include <dirent.h>
#include <dlfcn.h>

#include <sstream>

#include "common/clock.h"
#include "common/error.h"
#include "compile_farm/elf_symbols.h"
#include "tasks/comparison.h"
#include "tasks/references.h"
#include "worker/anti_hacking.h"
#include "worker/evald/tensors.h"
#include "worker/evald/timing.h"
#include "worker/outcome_proto.h"

namespace leap {
namespace {

using KernelFn = int (*)(const DLTensor*, int, DLTensor*, int, void*);

int count_threads() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (auto* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

constexpr int kEscapedException = -0x7EEE;

// Calls the candidate; an exception escaping it becomes an error code, never a crash of ours.
int invoke(KernelFn fn, DlViews& in, DlViews& out, std::string* what) {
  try {
    return fn(in.data(), in.size(), out.data(), out.size(), nullptr);
  } catch (const std::exception& e) {
    *what = e.what();
  } catch (...) {
    *what = "unknown exception";
  }
  return kEscapedException;
}

std::string call_error(int rc, const std::string& what) {
  if (rc == kEscapedException) return "an exception escaped leap_kernel: " + what;
  return "leap_kernel returned error code " + std::to_string(rc);
}

struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle) ::dlclose(handle);
  }
};

struct Buffers {
  std::vector<at::Tensor> inputs, pristine, outputs;
};

class Checker {
 public:
  Checker(proto::EvalRequest::Reader req, KernelFn fn, ReferenceFn ref, EvalOutcome& o)
      : req_(req), task_(req.getTask()), fn_(fn), ref_(ref), o_(o) {
    for (auto p : task_.getParams()) params_.emplace_back(p.getName(), p.getValue());
  }

  Buffers fresh(uint64_t seed) {
    Buffers b;
    unsigned i = 0;
    for (auto spec : task_.getInputs()) {
      b.inputs.push_back(make_input(spec, mix_seed(seed, i++)));
      b.pristine.push_back(b.inputs.back().clone());
    }
    for (auto spec : task_.getOutputs()) b.outputs.push_back(make_poisoned_output(spec));
    return b;
  }

  void refill(Buffers& b, uint64_t seed) {
    unsigned i = 0;
    for (auto spec : task_.getInputs()) {
      refill_input(b.inputs[i], spec, mix_seed(seed, i));
      b.pristine[i] = b.inputs[i].clone();
      ++i;
    }
    for (auto& t : b.outputs) poison(t);
  }

  int call(Buffers& b, std::string* what) {
    DlViews in(b.inputs), out(b.outputs);
    return invoke(fn_, in, out, what);
  }

  // One checked call. `previous` holds outputs the candidate could replay; `reuse_check`
  // names the cheat when it does. Returns false with o_ filled on any failure.
  bool check(Buffers& b, const std::vector<at::Tensor>* previous, const char* reuse_check) {
    int threads_before = count_threads();
    std::string what;
    auto t_call = Clock::now();
    int rc = call(b, &what);
    o_.stages.candidate_calls_us += micros_since(t_call);
    int threads_after = count_threads();
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
      if (int64_t n = count_poisoned(b.outputs[i], &first); n > 0)
        return fail(Status::cheat_detected, "partial_write",
                    std::to_string(n) + " of " + std::to_string(b.outputs[i].numel()) + " elements of output '" +
                        out_specs[i].getName().cStr() + "' were not written (first at flat index " +
                        std::to_string(first) + ")");
    }
    std::vector<at::Tensor> refs = ref_(b.pristine, params_);
    if (refs.size() != b.outputs.size()) throw LeapError("reference returned the wrong number of outputs");
    TrialResult trial;
    trial.index = static_cast<uint32_t>(o_.trials.size());
    trial.passed = true;
    std::string report;
    for (unsigned i = 0; i < b.outputs.size(); ++i) {
      // Compared in float32, or float64 for float64 outputs (exact for every narrower dtype).
      auto as = b.outputs[i].scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
      auto got = b.outputs[i].to(as).contiguous();
      auto want = refs[i].to(as).contiguous();
      if (got.sizes() != want.sizes()) throw LeapError("reference output shape differs from task.toml");
      Tolerance tol = tolerance_for(out_specs[i].getDtype());
      auto c = as == at::kDouble
                   ? compare_values(got.data_ptr<double>(), want.data_ptr<double>(), got.numel(), tol)
                   : compare_values(got.data_ptr<float>(), want.data_ptr<float>(), got.numel(), tol);
      trial.max_abs_error = std::max(trial.max_abs_error, c.max_abs);
      trial.max_rel_error = std::max(trial.max_rel_error, c.max_rel);
      if (!c.passed && trial.passed) {
        trial.passed = false;
        trial.first_bad_index = c.first_bad;
        trial.mismatches = c.mismatches;
        std::vector<int64_t> shape(got.sizes().begin(), got.sizes().end());
        report = describe_mismatch(c, shape, tol, out_specs[i].getName().cStr());
      }
    }
    o_.trials.push_back(trial);
    if (trial.passed) return true;
    if (previous && replayed(b.outputs, *previous))
      return fail(Status::cheat_detected, reuse_check,
                  "the outputs of this call are identical to an earlier call's although the inputs changed; " + report);
    return fail(Status::wrong_answer, "", "trial " + std::to_string(trial.index) + ": " + report);
  }

 private:
  static bool replayed(const std::vector<at::Tensor>& now, const std::vector<at::Tensor>& before) {
    for (size_t i = 0; i < now.size(); ++i)
      if (!bitwise_equal(now[i], before[i])) return false;
    return true;
  }

  Tolerance tolerance_for(proto::DType d) const {
    for (auto t : task_.getTolerances())
      if (t.getDtype() == d) return {t.getAtol(), t.getRtol()};
    return default_tolerance(from_proto(d));
  }

  bool fail(Status s, const std::string& check, const std::string& feedback) {
    o_.status = s;
    o_.check = check;
    o_.feedback = feedback;
    return false;
  }

  proto::EvalRequest::Reader req_;
  proto::TaskRef::Reader task_;
  KernelFn fn_;
  ReferenceFn ref_;
  EvalOutcome& o_;
  Params params_;
};

TimingSettings timing_settings(proto::EvalSettings::Reader s) {
  TimingSettings t;
  t.warmup_calls = s.getWarmupCalls();
  t.min_samples = s.getMinSamples();
  t.max_samples = s.getMaxSamples();
  t.budget_ms = s.getTimingBudgetMs();
  t.rse_target = s.getRseTarget();
  return t;
}

// Loads the library after the static checks; returns nullptr with o filled on failure.
KernelFn load(const std::string& path, Library& lib, EvalOutcome& o) {
  DynamicSymbols symbols;
  try {
    symbols = read_dynamic_symbols(path);
  } catch (const LeapError& e) {
    o.status = Status::runtime_error;
    o.feedback = e.what();
    return nullptr;
  }
  if (auto bad = forbidden_import(symbols.imports)) {
    o.status = Status::cheat_detected;
    o.check = "forbidden_import";
    o.feedback = "the candidate calls '" + *bad +
                 "': kernels may not create processes, open files, use the network or load libraries";
    return nullptr;
  }
  lib.handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) {
    o.status = Status::runtime_error;
    o.feedback = std::string("cannot load the candidate: ") + ::dlerror();
    return nullptr;
  }
  auto fn = reinterpret_cast<KernelFn>(::dlsym(lib.handle, "leap_kernel"));
  if (!fn) {
    o.status = Status::runtime_error;
    o.feedback = "the candidate does not export leap_kernel";
  }
  return fn;
}

void time_and_score(Checker& ck, Buffers& b, proto::EvalRequest::Reader req, ReferenceTimings& cache,
                    KernelFn fn, EvalOutcome& o) {
  auto settings = req.getSettings();
  auto ts = timing_settings(settings);
  auto t0 = Clock::now();
  DlViews in(b.inputs), out(b.outputs);
  std::string what;
  auto run = time_calls([&] { return invoke(fn, in, out, &what); }, ts);
  o.stages.timing_us = micros_since(t0);
  if (run.error != 0) {
    o.status = Status::runtime_error;
    o.feedback = call_error(run.error, what) + " during timing";
    return;
  }
  o.candidate_timing = run.stats;
  std::string task = req.getTask().getName();
  if (req.getHasReferenceTiming()) {
    o.reference_timing = from_proto(req.getReferenceTiming());
  } else if (auto it = cache.find(task); it != cache.end()) {
    o.reference_timing = it->second;
  } else {
    auto ref = find_reference(req.getTask().getReference());
    Params params;
    for (auto p : req.getTask().getParams()) params.emplace_back(p.getName(), p.getValue());
    auto rrun = time_calls([&] { ref(b.pristine, params); return 0; }, ts);
    o.reference_timing = cache[task] = rrun.stats;
  }
  o.speedup = o.candidate_timing.median_us > 0 ? o.reference_timing.median_us / o.candidate_timing.median_us : 0;
  if (o.speedup > settings.getSpeedupBound()) {
    o.speedup_flagged = true;
    Buffers again = ck.fresh(mix_seed(settings.getSeed(), 0x5EEDull));
    if (!ck.check(again, &b.outputs, "speedup_reverify")) {
      if (o.status == Status::wrong_answer) {
        o.status = Status::cheat_detected;
        o.check = "speedup_reverify";
      }
      return;
    }
  }
  o.status = Status::ok;
}

}  // namespace

EvalOutcome evaluate_request(proto::EvalRequest::Reader req, ReferenceTimings& cache) {
  auto t_start = Clock::now();
  EvalOutcome o;
  o.id = req.getId();
  o.task = req.getTask().getName();
  o.candidate = req.getCandidateName();
  o.backend = from_proto(req.getTask().getBackend());
  o.status = Status::infra_error;
  auto finish = [&]() -> EvalOutcome {
    o.stages.eval_us = micros_since(t_start);
    return o;
  };
  auto ref = find_reference(req.getTask().getReference());
  if (!ref) {
    o.feedback = "unknown reference implementation '" + std::string(req.getTask().getReference().cStr()) + "'";
    return finish();
  }
  Library lib;
  auto t_load = Clock::now();
  KernelFn fn = load(req.getLibraryPath(), lib, o);
  o.stages.load_us = micros_since(t_load);
  if (!fn) return finish();

  Checker ck(req, fn, ref, o);
  auto settings = req.getSettings();
  auto t_check = Clock::now();
  std::vector<Buffers> trials;  // all alive: every trial gets buffers at fresh addresses
  for (uint32_t t = 0; t < settings.getTrials(); ++t) {
    trials.push_back(ck.fresh(mix_seed(settings.getSeed(), t)));
    if (!ck.check(trials.back(), t ? &trials[t - 1].outputs : nullptr, "output_reuse")) return finish();
  }
  // Same buffers, new contents: a result cached by pointer replays the old outputs.
  Buffers& last = trials.back();
  std::vector<at::Tensor> before;
  for (auto& t : last.outputs) before.push_back(t.clone());
  ck.refill(last, mix_seed(settings.getSeed(), 0x9017E5ull));
  if (!ck.check(last, &before, "pointer_cache")) return finish();
  o.stages.correctness_us = micros_since(t_check);

  time_and_score(ck, last, req, cache, fn, o);
  return finish();
}

}  // namespace leap
