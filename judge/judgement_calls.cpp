#include "judge/judgement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/error.h"
#include "judge/cpu_wait.h"
#include "judge/gpu_lock.h"
#include "judge/tensors.h"

namespace leap {
namespace {

using runner::Command;
using runner::Reply;
using runner::ReplyKind;

constexpr unsigned kExtraChecks = 3;  // verified calls more when the speedup is implausible
constexpr uint32_t kLeastTrials = 2;   // trials before timing however slow the candidate (the first loads)
// Trials are cut only for calls this long: shorter ones cost little, and a trial's cold caches can
// make a call of tens of microseconds look twice as slow as the (warm) reference (relu on the CPU).
constexpr double kTrialCutFloorUs = 1000;

}  // namespace

bool Judgement::calls() {
  auto t_check = Clock::now();
  const uint32_t trials = settings_.getTrials();
  uint32_t run = 0;
  while (run < trials) {
    if (!call(Phase::trial, true, nullptr)) return false;
    if (++run != kLeastTrials || run == trials) continue;
    // A candidate clearly slower than its reference: its verified timed calls carry the rest of
    // the correctness check (every timed call gets fresh inputs and is verified or not at random).
    if (clearly_slow()) break;
    // The rest of a slow candidate's trials is untimed time long enough to make spares' contexts
    // in, instead of before a timing that would wait for them (the second call: the first loads).
    pool_.refill_during((trials - 2) * last_wall_us_ / 1000);
  }
  o_.trial_calls = run;
  trials_cut_ = run < trials;
  checker_.timed_calls_carry_trials(trials_cut_);
  o_.stages.correctness_us = micros_since(t_check);

  std::vector<double> samples;
  if (!timed_phase(samples)) return false;
  // Verified calls owed where the kept timed calls were fewer than the trials cut (a reservoir
  // the task's memory kept small).
  for (size_t k = checker_.kept(); run + k < trials; ++k)
    if (!call(Phase::extra, true, nullptr)) return false;
  if (!dev_.is_gpu()) {  // again, with the overhead measured beside the calls
    samples.clear();
    for (double x : observed_) samples.push_back(std::max(x - overhead_us_, 0.0));
  }
  o_.candidate_timing = stats_of(samples);
  double speedup = o_.reference_timing.median_us / std::max(o_.candidate_timing.median_us, 1e-9);
  if (speedup > settings_.getSpeedupBound()) {
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

// The second trial's own time (the judge's observation less its overhead) at least [eval]
// slow_stop_ratio times the reference's, and a millisecond: the rewards read no finer
// (docs/candidate-abi.md, "Timing").
bool Judgement::clearly_slow() const {
  const double ratio = settings_.getSlowStopRatio(), reference_us = o_.reference_timing.median_us;
  const double own_us = last_observed_us_ - overhead_us_;
  return ratio > 0 && reference_us > 0 && own_us >= kTrialCutFloorUs && own_us >= ratio * reference_us;
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
  const bool warm = trials_cut_ && last_wall_us_ >= 1000 * ts_.warmup_ms;
  for (unsigned i = 0; !warm && !warmup_done(i, micros_since(t_timing) / 1000.0, ts_); ++i) {
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
    observed_.clear();
    reported_.clear();
    waited_.clear();
    live_overhead_.clear();
    live_net_overhead_.clear();
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
  const size_t fixed = std::max<uint32_t>(ts_.min_samples, 10);
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
               : timing_done(samples, ts_, micros_since(t0) / 1000.0, reference_us, req_.getTask().getMinSpeedup()))
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
  double cpu0 = window_start(*runner_);
  checker_.fill(slot, mix_seed(o_.seed, index));
  dev_.before_call();
  Command c;
  c.op = runner::Op::call;
  c.seq = ++seq_;
  c.slot = static_cast<uint32_t>(last_slot_);
  c.audit = phase == Phase::trial;
  // A spare making its CUDA context can stall the call (the driver's work): not held against it.
  const bool disturbed = dev_.is_gpu() && pool_.starting();
  Reply r;
  double wall = 0, own_us = -1, waited_us = 0;
  if (!await_call(c, index, &r, &wall, &own_us, &waited_us)) return false;
  last_wall_us_ = wall;
  double observed = last_observed_us_ = observed_us(*runner_, wall, cpu0);
  if (phase == Phase::trial) o_.stages.candidate_calls_us += wall;
  if (own_us >= 0 && !disturbed && !within_limit(index, dev_.is_gpu() ? own_us : std::max(own_us, observed)))
    return false;
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
    if (!checker_.verify(slot, phase == Phase::trial, phase == Phase::trial ? Check::none : Check::timed_call_wrong)) return false;
  }
  if (phase == Phase::sample) {
    observed_.push_back(observed);
    reported_.push_back(r.elapsed_us);
    waited_.push_back(dev_.is_gpu() ? waited_us : 0);
    // CPU: the kernel's account of the runner's CPU time for the call, not the runner's word.
    // GPU: the runner's events (the precise figure) no lower than what the judge's own clock
    // allows for this call: a forged or escaping call gains at most the allowance, whatever
    // share of calls forge.
    *elapsed_us = dev_.is_gpu() ? std::max(r.elapsed_us, observed - overhead_us_ - allowed_excess_us(r.elapsed_us))
                                : std::max(observed - overhead_us_, 0.0);
  }
  return true;
}

// Sends call `index` and waits for its reply: within the deadline for the first call (it may
// autotune, load modules, build caches), within 10x the call limit for the others. `own_us`: the
// call's own time where a limit applies (else left as it was); `waited_us`: how long the runner's
// thread waited for a CPU meanwhile (on the GPU, and wherever a limit applies).
bool Judgement::await_call(const Command& c, size_t index, Reply* r, double* wall, double* own_us, double* waited_us) {
  const double limit_ms = index == 0 ? 0 : 10 * call_limit_ms();
  candidate_deadline();
  auto until = limit_ms > 0 ? std::min(deadline_, after_seconds(limit_ms / 1000)) : deadline_;
  // A call's own time against its limit: the wall clock less the runner's wait for a CPU (CpuWait).
  // A busy machine stretches a call's wall time, not this; a candidate that sleeps or waits on the
  // device is not waiting for a CPU, so it keeps all of its time.
  const CpuWait load(*runner_, call_limit_ms() > 0 || dev_.is_gpu());
  const auto t0 = Clock::now();
  auto w = runner_->request(c, {}, until, r, wall);
  // The limit counts from the send (the timing's window, *wall, from before it).
  const auto call_start = runner_->sent();
  // Past 10x the limit by the wall clock but not by the call's own time: the machine's load held
  // it back, so it gets the rest of its 10x (within the deadline).
  bool waited_on = false;
  while (w == Runner::Wait::deadline && until < deadline_) {
    const double left_us = 1000 * limit_ms - std::max(micros_since(call_start) - load.waited_us(), 0.0);
    if (left_us <= 0) break;
    until = std::min(deadline_, after_seconds(left_us / 1e6));
    w = runner_->await(until, r);
    waited_on = true;
  }
  if (waited_on) *wall = micros_since(t0);
  *waited_us = load.waited_us();  // read once: the call is over (or stopped) from here on
  const auto own = [&](double wall_us) { return std::max(wall_us - *waited_us, 0.0); };
  judge_since_ = Clock::now();
  if (w == Runner::Wait::deadline) {
    // Stopped at 10x the call limit, or by the evaluation's deadline after running past the
    // limit: the same verdict either way (which comes first depends on how loaded the machine
    // is, and a policy conditioned on the verdict must not see the load).
    const bool over_limit = call_limit_ms() > 0 && own(micros_since(call_start)) > 1000 * call_limit_ms();
    if (until < deadline_ || over_limit) {
      char buf[320];
      if (index == 0)
        std::snprintf(buf, sizeof buf,
                      "call 1 did not end within the evaluation's %g s deadline (the first call's budget; later "
                      "calls' limit: %s): stopped as too slow",
                      static_cast<double>(settings_.getDeadlineS()), limit_text().c_str());
      else
        std::snprintf(buf, sizeof buf, "call %zu took longer than %.1f ms, 10 x its limit of %s: stopped as too slow",
                      index + 1, 10 * call_limit_ms(), limit_text().c_str());
      return fail(Status::timeout, Check::too_slow, buf);
    }
  }
  if (w != Runner::Wait::reply) return runner_failed(w, "during call " + std::to_string(index + 1));
  if (index > 0 && call_limit_ms() > 0) {
    // The call's own time: to the kernel's stamp on the reply (this judge's wait for a CPU
    // before it reads the reply is not the call's), less the runner's wait.
    const double replied_us = runner_->reply_after_us(), since_sent = micros_since(call_start);
    *own_us = own(replied_us >= 0 ? std::min(replied_us, since_sent) : since_sent);
  }
  return true;
}

// Calls 2.. against their limit (on the CPU never less than the runner's CPU time in the call):
// once most of them were over it (both of calls 2 and 3, or more than half of more), the candidate
// is too slow. One stalled call is forgiven. Two of two decide: a fourth call could not make them
// fewer than most of three, so it would only add its time to the judge's.
bool Judgement::within_limit(size_t index, double own_us) {
  ++later_calls_;
  slow_calls_ += own_us > 1000 * call_limit_ms();
  if (later_calls_ < 2 || 2 * slow_calls_ <= later_calls_) return true;
  char buf[320];
  std::snprintf(buf, sizeof buf, "call %zu took %.1f ms; %d of calls 2-%zu took longer than their limit of %s: "
                "stopped as too slow", index + 1, own_us / 1000, slow_calls_, index + 1, limit_text().c_str());
  return fail(Status::timeout, Check::too_slow, buf);
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
    std::string msg = r.rc == runner::kEscapedException ? std::string("an exception escaped leap_kernel: ") + r.message
                      : r.rc == runner::kPythonException ? std::string("ModelNew raised ") + r.message
                                                         : "leap_kernel returned error code " + std::to_string(r.rc);
    return fail(Status::runtime_error, Check::none, msg);
  }
  return threads_unchanged();
}

// A call's limit: call_limit_ratio x the reference, never under the floor; 0: only the deadline.
// A later call running ten times over it is stopped (the first call's budget is the deadline: it
// loads modules, faults pages in, autotunes, builds what it caches). From the third call after the first, the
// evaluation ends once most of those calls were over it: a slow candidate is over it on every
// call, an honest one only where a call stalled while the driver created or tore down another
// runner's context (seen on the H200: GEMM examples at 140-280 ms, 100x their reference); calls
// made while one of this judge's spares was starting are not counted.
double Judgement::call_limit_ms() const {
  const double ratio = settings_.getCallLimitRatio();
  if (ratio <= 0 || o_.reference_timing.median_us <= 0) return 0;
  return std::max(ratio * o_.reference_timing.median_us / 1000, settings_.getCallLimitFloorMs());
}

// "5.0 ms = max(100 x reference 26.6 us, floor 5.0 ms) ([eval] call_limit_ratio, call_limit_floor_ms)"
std::string Judgement::limit_text() const {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%.1f ms = max(%g x reference %.1f us, floor %.1f ms) ([eval] call_limit_ratio, "
                "call_limit_floor_ms)", call_limit_ms(), settings_.getCallLimitRatio(), o_.reference_timing.median_us,
                static_cast<double>(settings_.getCallLimitFloorMs()));
  return buf;
}

// What the judge itself saw of a call: on the GPU its wall clock (the runner synchronises the
// whole device before answering); on the CPU the kernel's account of the runner's CPU time,
// which the single-threaded candidate cannot forge and other load on the machine does not inflate.
// On the CPU each call's window ends where the runner's next one starts (Runner::cpu_mark_us),
// so no CPU time of a runner's falls between two of its windows.
double Judgement::observed_us(Runner& r, double wall_us, double cpu_before_us) {
  if (dev_.is_gpu()) return wall_us;
  r.cpu_mark_us = r.cpu_time_us();
  return r.cpu_mark_us - cpu_before_us;
}

// How far the judge's observation of a call may exceed the runner's report before the report
// is not believed: noise of the judge's own clock and wake-up. A Python runner's wake-up for the
// next request costs its interpreter 20-90 us of CPU on the CI machine (measured in the runner:
// the blocking read's return, cold after the call's and the judge's memory traffic), which a
// calibration on an idle spare does not see.
double Judgement::allowed_excess_us(double reported_us) const {
  const double slack_us = settings_.getTimingSlackUs() > 0 ? settings_.getTimingSlackUs()
                          : dev_.is_gpu()                  ? 50
                          : python_                        ? 120
                                                           : 20;
  // On the CPU the candidate's time is the kernel's account of its CPU time, never its report,
  // so a false report gains nothing there: only a report under half of what the kernel counted
  // is called forged, where another process's load inflated an honest call's CPU time by 25-38 %
  // (relu, 97 us a call, beside a Python runner's start on the 2-core CI machine).
  const double fraction = dev_.is_gpu() ? settings_.getTimingSlack() : std::max(settings_.getTimingSlack(), 1.0);
  return std::max(fraction * reported_us, slack_us);
}

// The runner's own timing is the candidate's to forge; what the judge observed of the same call
// bounds it: observed = overhead + the call (the overhead measured beside the timed calls on a
// spare runner, under the same load), and on the GPU device-wide
// synchronisation puts work launched on other streams into the wall but not into the evaluator
// stream's events. On the GPU a runner spinning on the device's completion is preempted for whole
// scheduler slices on a machine whose cores are all busy (3.3 ms over 3.4 ms calls, seen on an
// H100 beside a busy loop per core): the machine's load, not work outside the stream. So the calls
// whose runner did not wait for a CPU (CpuWait, net of its own threads) are judged as observed;
// only where fewer than half of them are such calls is each call's wait taken off instead, which
// credits a wait that overlapped the kernel too (the GPU went on: 75.8 ms under 150 ms calls on
// that machine) and so lets more escape unnamed. Against the overhead with its calibrations' waits
// taken off. The timed samples keep their bound (the whole observation less the whole overhead),
// so a candidate gains no time from a wait either way.
bool Judgement::timing_consistent(bool final) {
  constexpr double kNoWaitUs = 10;  // a call's wait for a CPU up to this: a call that did not wait
  const bool live = live_overhead_.size() >= 3;  // else the overhead measured before the load
  if (live) overhead_us_ = quantile(live_overhead_, 0.5);
  const double net_overhead_us = live ? quantile(live_net_overhead_, 0.5) : net_overhead_us_;
  const CallExcess calls = call_excess(observed_, waited_, reported_, net_overhead_us, kNoWaitUs);
  const std::vector<double>& excess = calls.values;
  // The median call: an escape on most calls shows, a preempted judge on some does not (and a
  // call's sample is bounded by the judge's clock anyway).
  o_.wall_excess_us = quantile(excess, 0.5);
  double reported = quantile(reported_, 0.5);
  double allowed = allowed_excess_us(reported);
  if (o_.wall_excess_us <= allowed) return true;
  if (!final) return false;
  // The spreads tell a shift on every call (work elsewhere) from a load that moved some calls;
  // the overhead's is that of the measurements the excess was reckoned against.
  const auto& over = live ? live_net_overhead_ : std::vector<double>{net_overhead_us};
  char waited[128] = "";
  if (dev_.is_gpu() && calls.as_observed)
    std::snprintf(waited, sizeof waited, "; the %zu of %zu calls whose runner did not wait for a CPU", calls.unwaited,
                  observed_.size());
  else if (dev_.is_gpu())
    std::snprintf(waited, sizeof waited, ", and the runner's wait for a CPU, median %.1f us, taken off",
                  quantile(waited_, 0.5));
  char buf[480];
  std::snprintf(buf, sizeof buf,
                "the judge observed %.1f us per call more than the %.1f us the runner reported (overhead %.1f us "
                "measured on runners that never held a candidate%s; allowed %.1f us; over %zu calls the excess's "
                "10th-90th percentiles %.1f-%.1f us, the overhead's %.1f-%.1f us)",
                o_.wall_excess_us, reported, net_overhead_us, waited, allowed, excess.size(), quantile(excess, 0.1),
                quantile(excess, 0.9), quantile(over, 0.1), quantile(over, 0.9));
  // Each call as measured, so that a verdict on an honest kernel (the judge's bug) can be read
  // back: the judge's observation over the runner's report, the runner's wait, the calibrations beside.
  std::string calls_seen = ". Per call, the judge's observation over the report and the wait for a CPU (us):";
  for (size_t i = 0; i < observed_.size() && i < 12; ++i)
    calls_seen += (i ? ", " : " ") + std::to_string(std::lround(observed_[i] - reported_[i])) + "/" +
                  std::to_string(std::lround(waited_[i]));
  calls_seen += "; the calibrations' overhead (us):";
  for (size_t i = 0; i < over.size() && i < 12; ++i) calls_seen += (i ? ", " : " ") + std::to_string(std::lround(over[i]));
  return dev_.is_gpu() ? fail(Status::cheat_detected, Check::stream_escape,
                              std::string(buf) + ": work ran outside the evaluator's stream" + calls_seen)
                       : fail(Status::cheat_detected, Check::timing_forged,
                              std::string(buf) + ": the timing was forged" + calls_seen);
}

}  // namespace leap
