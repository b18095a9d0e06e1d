#include "worker/evald/evaluation.h"

#include <dlfcn.h>

#include <algorithm>

#include "common/clock.h"
#include "common/error.h"
#include "compile_farm/elf_symbols.h"
#include "worker/anti_hacking.h"
#include "worker/evald/checker.h"
#include "worker/evald/tensors.h"
#include "worker/outcome_proto.h"

namespace leap {
namespace {

constexpr size_t kTimingSets = 4;         // input sets rotated during GPU timing
constexpr unsigned kWallCheckCalls = 10;  // synchronised wall-clock calls for the stream check
constexpr double kStreamSlack = 1.5;      // wall may exceed event time by this factor ...
constexpr double kStreamSlackUs = 50;     // ... plus launch and synchronisation latency

struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle) ::dlclose(handle);
  }
};

TimingSettings timing_settings(proto::EvalSettings::Reader s) {
  TimingSettings t;
  t.warmup_calls = s.getWarmupCalls();
  t.warmup_ms = s.getWarmupMs();
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
                 "': kernels may not create processes, open files, use the network, load libraries, or call "
                 "vendor libraries (cuBLAS, cuDNN) or LibTorch";
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

class Scoring {
 public:
  Scoring(proto::EvalRequest::Reader req, Device& dev, Checker& ck, std::vector<Buffers>& sets, EvalOutcome& o)
      : req_(req), dev_(dev), ck_(ck), sets_(sets), o_(o), ts_(timing_settings(req.getSettings())) {}

  void run(ReferenceTimings& cache) {
    if (!time_candidate()) return;
    if (dev_.is_gpu() && (!verify_last_timed_call() || !stream_honest())) return;
    reference_timing(cache);
    o_.speedup = o_.candidate_timing.median_us > 0 ? o_.reference_timing.median_us / o_.candidate_timing.median_us : 0;
    if (o_.speedup > req_.getSettings().getSpeedupBound() && !reverify()) return;
    o_.status = Status::ok;
  }

 private:
  int call(size_t k) {
    last_set_ = k;
    return ck_.call(sets_[k], &what_);
  }
  void prepare(size_t k) {
    if (dev_.is_gpu())
      for (auto& t : sets_[k].outputs) poison(t);
  }

  bool time_candidate() {
    auto t0 = Clock::now();
    auto run = dev_.time_candidate([&](size_t k) { return call(k); }, sets_.size(), [&](size_t k) { prepare(k); }, ts_);
    o_.stages.timing_us = micros_since(t0);
    if (run.error != 0) {
      bool sticky = false;
      std::string err = dev_.finish_call(&sticky);
      o_.recycle_evaluator = o_.recycle_evaluator || sticky;
      return ck_.fail(Status::runtime_error, "", (err.empty() ? Checker::call_error(run.error, what_) : err) +
                                                     " during timing");
    }
    o_.candidate_timing = run.stats;
    return true;
  }

  // Outputs were poisoned before every timed call: the last one must have computed its set.
  bool verify_last_timed_call() {
    auto& b = sets_[last_set_];
    for (auto& t : b.outputs) {
      int64_t first = -1;
      if (count_poisoned(t, &first) > 0)
        return ck_.fail(Status::cheat_detected, "timing_replay",
                        "a timed call left its outputs unwritten (work skipped for a buffer seen before)");
    }
    std::string report;
    if (!ck_.outputs_correct(b, &report))
      return ck_.fail(Status::cheat_detected, "timing_replay", "a timed call produced wrong outputs: " + report);
    return true;
  }

  // Work launched on other streams escapes CUDA-event timing but not a device-wide sync. Both
  // are taken over the same calls, and a finding must repeat, so that load from elsewhere on
  // the GPU is not mistaken for an escape.
  bool stream_honest() {
    Device::WallAndEvents m;
    for (int attempt = 0; attempt < 2; ++attempt) {
      m = dev_.synchronised_wall([&](size_t k) { return call(k); }, sets_.size(), [&](size_t k) { prepare(k); },
                                 kWallCheckCalls);
      if (m.wall_us <= kStreamSlack * m.events_us + kStreamSlackUs) return true;
    }
    return ck_.fail(Status::cheat_detected, "stream_escape",
                    fmt_us("event-timed median ", m.events_us) +
                        fmt_us(" but device-synchronised wall median ", m.wall_us) +
                        " over the same calls: work ran outside the evaluator's stream");
  }

  void reference_timing(ReferenceTimings& cache) {
    std::string key = std::string(req_.getTask().getName().cStr()) + "@" + dev_.name();
    if (req_.getHasReferenceTiming()) {
      o_.reference_timing = from_proto(req_.getReferenceTiming());
    } else if (auto it = cache.find(key); it != cache.end()) {
      o_.reference_timing = it->second;
    } else {
      auto run = dev_.time_reference([&](size_t k) { ck_.reference(sets_[k]); }, sets_.size(), ts_);
      o_.reference_timing = cache[key] = run.stats;
    }
  }

  bool reverify() {
    o_.speedup_flagged = true;
    Buffers again = ck_.fresh(mix_seed(req_.getSettings().getSeed(), 0x5EEDull));
    if (ck_.check(again, &sets_.back().outputs, "speedup_reverify")) return true;
    if (o_.status == Status::wrong_answer) {
      o_.status = Status::cheat_detected;
      o_.check = "speedup_reverify";
    }
    return false;
  }

  static std::string fmt_us(const char* label, double us) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f us", us);
    return label + std::string(buf);
  }

  proto::EvalRequest::Reader req_;
  Device& dev_;
  Checker& ck_;
  std::vector<Buffers>& sets_;
  EvalOutcome& o_;
  TimingSettings ts_;
  size_t last_set_ = 0;
  std::string what_;
};

}  // namespace

EvalOutcome evaluate_request(proto::EvalRequest::Reader req, Device& dev, ReferenceTimings& cache) {
  auto t_start = Clock::now();
  EvalOutcome o;
  o.id = req.getId();
  o.task = req.getTask().getName();
  o.candidate = req.getCandidateName();
  o.backend = from_proto(req.getTask().getBackend());
  o.status = Status::infra_error;
  Library lib;
  std::vector<Buffers> trials;  // all alive: every trial gets buffers at fresh addresses
  auto finish = [&]() -> EvalOutcome {
    o.stages.eval_us = micros_since(t_start);
    if (o.recycle_evaluator) {
      // Candidate code may still be running (a stray thread, a faulted device): its library
      // and buffers stay as they are until the evaluator exits right after replying.
      lib.handle = nullptr;
      new std::vector<Buffers>(std::move(trials));
    }
    return o;
  };
  auto ref = find_reference(req.getTask().getReference());
  if (!ref) {
    o.feedback = "unknown reference implementation '" + std::string(req.getTask().getReference().cStr()) + "'";
    return finish();
  }
  auto t_load = Clock::now();
  KernelFn fn = load(req.getLibraryPath(), lib, o);
  o.stages.load_us = micros_since(t_load);
  if (!fn) return finish();

  Checker ck(req.getTask(), fn, ref, dev, o);
  auto settings = req.getSettings();
  auto t_check = Clock::now();
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

  // Timing rotates over the last trials' buffers on the GPU (no result can be replayed); the
  // CPU times the last set.
  size_t n_sets = dev.is_gpu() ? std::min(kTimingSets, trials.size()) : 1;
  std::vector<Buffers> sets(std::make_move_iterator(trials.end() - static_cast<long>(n_sets)),
                            std::make_move_iterator(trials.end()));
  Scoring(req, dev, ck, sets, o).run(cache);
  if (o.recycle_evaluator) trials = std::move(sets);
  return finish();
}

}  // namespace leap
