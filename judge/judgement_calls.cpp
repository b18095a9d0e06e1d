#include "judge/judgement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/error.h"
#include "judge/check/tensors.h"
#include "judge/device/gpu_lock.h"
#include "judge/pool/cpu_wait.h"

namespace leap {
namespace {

using runner::Command;
using runner::Reply;
using runner::ReplyKind;

constexpr unsigned kExtraChecks = 3;  // verified calls more when the speedup is implausible

}  // namespace

bool Judgement::calls() {
  auto t_check = Clock::now();
  const uint32_t trials = settings_.eval.trials;
  uint32_t run = 0;
  while (run < trials) {
    if (!call(Phase::trial, true, nullptr)) return false;
    if (++run != CallBudget::kLeastTrials || run == trials) continue;
    // A candidate clearly slower than its reference: its verified timed calls carry the rest of
    // the correctness check (every timed call gets fresh inputs and is verified or not at random).
    if (budget_.cut_trials(last_observed_us_ - calibration_.overhead_us())) break;
    // The rest of a slow candidate's trials is untimed time long enough to make spares' contexts
    // in, instead of before a timing that would wait for them (the second call: the first loads).
    pool_.refill_during((trials - 2) * last_wall_us_ / 1000);
  }
  o_.trial_calls = run;
  checker_.timed_calls_carry_trials(budget_.trials_cut());
  o_.stages.correctness_us = micros_since(t_check);

  std::vector<double> samples;
  if (!timed_phase(samples)) return false;
  // Verified calls owed where the kept timed calls were fewer than the trials cut (a reservoir
  // the task's memory kept small).
  for (size_t k = checker_.kept(); run + k < trials; ++k)
    if (!call(Phase::extra, true, nullptr)) return false;
  if (!dev_.is_gpu())
    samples = calibration_.samples_less_overhead();  // again, with the overhead measured beside the calls
  o_.candidate_timing = stats_of(samples);
  double speedup = o_.reference_timing.median_us / std::max(o_.candidate_timing.median_us, 1e-9);
  if (speedup > settings_.eval.speedup_bound) {
    o_.speedup_flagged = true;
    for (unsigned i = 0; i < kExtraChecks; ++i)
      if (!call(Phase::extra, true, nullptr)) return false;
  }
  // The sampled timed calls, once no candidate code runs any more.
  retire_runner();
  o_.verified_calls += static_cast<uint32_t>(checker_.kept());
  auto t_kept = Clock::now();
  bool right = checker_.verify_kept(slots_);
  o_.stages.kept_verify_us = micros_since(t_kept);
  return right;
}

// Warm-up and timed calls, the device the judge's alone (GpuLock): `samples` are the timings,
// re-measured once when the first ones do not agree with what the judge observed.
bool Judgement::timed_phase(std::vector<double>& samples) {
  quiet();
  GpuLock::Timing timing(lock_);
  auto t_timing = Clock::now();
  // A clearly slow candidate whose calls are longer than the warm-up's time is warm from its
  // trials (they loaded its modules and faulted its pages, and one such call settles the clocks):
  // another untimed call would only cost its time (150 ms for a naive GEMM).
  const bool warm = budget_.trials_cut() && last_wall_us_ >= 1000 * settings_.eval.warmup_ms;
  for (unsigned i = 0; !warm && !warmup_done(i, micros_since(t_timing) / 1000.0, settings_.eval); ++i) {
    if (!call(Phase::warmup, false, nullptr)) return false;
    ++o_.warmup_calls;
    if (i % 2 == 0) recalibrate(false);  // the timed calls' cadence (a calibration after every other call)
  }
  if (!timed_calls(samples, false)) return false;
  if (!timing_consistent(false)) {
    // The machine's load can move the overhead between the spare's calibrations and the
    // candidate's calls (runners starting, say): once more, every call paired with a
    // calibration right after it, and these calls' timings replace the first ones, so a
    // candidate that stops escaping here gains nothing from having escaped before.
    calibration_.restart();
    samples.clear();
    if (!timed_calls(samples, true) || !timing_consistent(true)) return false;
  }
  o_.stages.timing_us = micros_since(t_timing);
  return true;
}

// Timed calls into `samples`, then the last one verified in place (its inputs too). Until the
// timing is precise enough, a spare calibrated after every other call; `paired`: a fixed
// number of calls, each followed by a calibration.
bool Judgement::timed_calls(std::vector<double>& samples, bool paired) {
  const size_t fixed = std::max<uint32_t>(settings_.eval.min_samples, 10);
  auto t0 = Clock::now();
  for (;;) {
    double elapsed = 0;
    // The stop decision is taken after the call; a call that turns out last is verified then.
    if (!call(Phase::sample, false, &elapsed)) return false;
    samples.push_back(elapsed);
    if (paired || samples.size() % 2 == 1) recalibrate();  // every other call: enough to follow the load
    // The slow-candidate stop on the GPU only, where timing is exclusive: on shared CPU cores five
    // calls' window is short enough for a transient to cover it (docs/candidate-abi.md, "Timing").
    const double reference_us = dev_.is_gpu() ? o_.reference_timing.median_us : 0;
    if (paired ? samples.size() >= fixed
               : timing_done(samples, settings_.eval, micros_since(t0) / 1000.0, reference_us,
                             req_.getTask().getMinSpeedup()))
      break;
  }
  ++o_.verified_calls;
  return checker_.verify(slots_[last_slot_], false, Check::timed_call_wrong);
}

// One call: fresh inputs, poisoned outputs, the runner's reply, and the judge's checks.
bool Judgement::call(Phase phase, bool verify, double* elapsed_us) {
  size_t index = o_.calls++;
  Slots::Slot& slot = slots_[index % slots_.size()];
  last_slot_ = index % slots_.size();
  // The window opens before the judge prepares the call: what the runner runs between a reply
  // and the next request is the candidate's too.
  Runner& runner = session_->runner();
  const double cpu0 = session_->window_start(runner);
  checker_.fill(slot, mix_seed(o_.seed, index));
  dev_.before_call();
  Command c;
  c.op = runner::Op::call;
  c.seq = session_->next_seq();
  c.slot = static_cast<uint32_t>(last_slot_);
  c.audit = phase == Phase::trial;
  // A spare making its CUDA context can stall the call (the driver's work): not held against it.
  const bool disturbed = dev_.is_gpu() && pool_.starting();
  Reply r;
  double wall = 0, own_us = -1, waited_us = 0;
  if (!await_call(c, index, &r, &wall, &own_us, &waited_us)) return false;
  last_wall_us_ = wall;
  const double observed = last_observed_us_ = session_->observed_us(runner, wall, cpu0);
  if (phase == Phase::trial) o_.stages.candidate_calls_us += wall;
  if (own_us >= 0 && !disturbed)
    if (auto v = budget_.after_call(index, dev_.is_gpu() ? own_us : std::max(own_us, observed))) return fail(*v);
  if (!reply_answers(c, r)) return false;
  if (auto err = dev_.synchronize(); !err.empty()) throw LeapError(err);
  if (!checker_.all_written(slot, index == 0)) return false;
  // A warm-up call is neither timed nor compared, but gets a timed call's after-call work (the
  // output copy too): otherwise the first timed calls stand out by their longer gaps.
  if (phase == Phase::warmup) {
    checker_.copy_out(slots_, slot);
    return true;
  }
  if (phase == Phase::sample) checker_.keep(slots_, slot, mix_seed(o_.seed, index), o_.calls, keep_rng_);
  if (verify) {
    ++o_.verified_calls;
    if (!checker_.verify(slot, phase == Phase::trial, phase == Phase::trial ? Check::none : Check::timed_call_wrong))
      return false;
  }
  if (phase == Phase::sample) *elapsed_us = calibration_.add_call(observed, r.elapsed_us, waited_us);
  return true;
}

// Sends call `index` and waits for its reply: within the deadline for the first call (it may
// autotune, load modules, build caches), within 10x the call limit for the others. `own_us`: the
// call's own time where a limit applies (else left as it was); `waited_us`: how long the runner's
// thread waited for a CPU meanwhile (on the GPU, and wherever a limit applies).
bool Judgement::await_call(const Command& c, size_t index, Reply* r, double* wall, double* own_us, double* waited_us) {
  Runner& runner = session_->runner();
  CandidateDeadline& deadline = session_->deadline();
  const double limit_ms = budget_.stop_after_ms(index);
  deadline.next_request(Clock::now());
  auto until = limit_ms > 0 ? std::min(deadline.at(), after_seconds(limit_ms / 1000)) : deadline.at();
  // A call's own time against its limit: the wall clock less the runner's wait for a CPU (CpuWait).
  // A busy machine stretches a call's wall time, not this; a candidate that sleeps or waits on the
  // device is not waiting for a CPU, so it keeps all of its time.
  const CpuWait load(runner, budget_.limit_ms() > 0 || dev_.is_gpu());
  const auto t0 = Clock::now();
  auto w = runner.request(c, {}, until, r, wall);
  // The limit counts from the send (the timing's window, *wall, from before it).
  const auto call_start = runner.sent();
  // Past 10x the limit by the wall clock but not by the call's own time: the machine's load held
  // it back, so it gets the rest of its 10x (within the deadline).
  bool waited_on = false;
  while (w == Runner::Wait::deadline && until < deadline.at()) {
    const double left_us = 1000 * limit_ms - std::max(micros_since(call_start) - load.waited_us(), 0.0);
    if (left_us <= 0) break;
    until = std::min(deadline.at(), after_seconds(left_us / 1e6));
    w = runner.await(until, r);
    waited_on = true;
  }
  if (waited_on) *wall = micros_since(t0);
  *waited_us = load.waited_us();  // read once: the call is over (or stopped) from here on
  const auto own = [&](double wall_us) { return std::max(wall_us - *waited_us, 0.0); };
  deadline.judge_resumes(Clock::now());
  // Stopped at 10x the call limit, or by the evaluation's deadline after running past the limit.
  if (w == Runner::Wait::deadline && (until < deadline.at() || budget_.over_limit(own(micros_since(call_start)))))
    return fail(budget_.stopped(index));
  if (w != Runner::Wait::reply) return fail(session_->failed(w, "during call " + std::to_string(index + 1)));
  if (index > 0 && budget_.limit_ms() > 0) {
    // The call's own time: to the kernel's stamp on the reply (this judge's wait for a CPU
    // before it reads the reply is not the call's), less the runner's wait.
    const double replied_us = runner.reply_after_us(), since_sent = micros_since(call_start);
    *own_us = own(replied_us >= 0 ? std::min(replied_us, since_sent) : since_sent);
  }
  return true;
}

// The reply answers this request, reports no error, and no thread of the candidate's outlived it.
bool Judgement::reply_answers(const Command& c, const Reply& r) {
  if (r.kind != ReplyKind::called || r.seq != c.seq)
    return fail(Status::cheat_detected, Check::forged_reply,
                "the runner's reply does not answer the judge's request (a forged or replayed reply)");
  if (r.cuda_error != 0) return fail(Status::runtime_error, Check::none, std::string("CUDA error: ") + r.message);
  if (r.rc == runner::kNoCustomKernel)
    return fail(Status::cheat_detected, Check::no_custom_kernel,
                std::string("ModelNew's forward ran no kernel of its own (load_inline or Triton): ") + r.message);
  if (r.rc == runner::kVendorLibrary)
    return fail(Status::cheat_detected, Check::vendor_library,
                std::string("ModelNew's forward ran a vendor library's operator: ") + r.message);
  if (r.rc != 0) {
    std::string msg = r.rc == runner::kEscapedException  ? std::string("an exception escaped leap_kernel: ") + r.message
                      : r.rc == runner::kPythonException ? std::string("ModelNew raised ") + r.message
                                                         : "leap_kernel returned error code " + std::to_string(r.rc);
    return fail(Status::runtime_error, Check::none, msg);
  }
  return threads_unchanged();
}

bool Judgement::timing_consistent(bool final) {
  auto v = calibration_.check(&o_.wall_excess_us);
  if (!v) return true;
  return final ? fail(*v) : false;
}

}  // namespace leap
