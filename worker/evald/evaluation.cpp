#include "worker/evald/evaluation.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>

#include "common/clock.h"
#include "common/error.h"
#include "worker/anti_hacking.h"
#include "worker/evald/checker.h"
#include "worker/evald/gpu_lock.h"
#include "worker/evald/tensors.h"
#include "worker/evald/timing.h"
#include "common/outcome_proto.h"

namespace leap {
namespace {

using runner::Command;
using runner::Reply;
using runner::ReplyKind;

constexpr unsigned kCalibrationCalls = 9;  // trusted no-op calls before the candidate loads
constexpr unsigned kExtraChecks = 3;       // verified calls more when the speedup is implausible

uint64_t fresh_seed() {
  uint64_t s = 0;
  if (::getrandom(&s, sizeof s, 0) != sizeof s) s = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  return s ? s : 1;
}

TimingSettings timing_settings(proto::EvalSettings::Reader s) {
  TimingSettings t;
  t.warmup_calls = s.getWarmupCalls();
  t.warmup_ms = s.getWarmupMs();
  t.min_samples = s.getMinSamples();
  t.over_budget_samples = s.getOverBudgetSamples();
  t.precise_stop_ms = s.getPreciseStopMs();
  t.max_samples = s.getMaxSamples();
  t.budget_ms = s.getTimingBudgetMs();
  t.rse_target = s.getRseTarget();
  return t;
}

// One evaluation: the judge's side of every call of the candidate.
class Judgement {
 public:
  Judgement(proto::EvalRequest::Reader req, Device& dev, RunnerPool& pool, ReferenceTimings& cache,
            Workspace& workspace, GpuLock& lock, EvalOutcome& o)
      : req_(req), settings_(req.getSettings()), dev_(dev), pool_(pool), cache_(cache), workspace_(workspace),
        lock_(lock), o_(o),
        ts_(timing_settings(settings_)), checker_(req.getTask(), dev, o) {
    o_.seed = settings_.getSeed() ? settings_.getSeed() : fresh_seed();
    keep_rng_.seed(mix_seed(o_.seed, 0xC0FFEEull));
    deadline_ = after_seconds(settings_.getDeadlineS() > 0 ? settings_.getDeadlineS() : 30);
  }

  ~Judgement() {
    if (!runner_) return;
    // Diagnostics of the sandbox (what the seccomp filter refused), for whoever debugs a driver.
    if (std::getenv("LEAP_RUNNER_SECCOMP_DEBUG")) o_.feedback += "\n[runner stderr]\n" + runner_->stderr_tail();
    retire_runner();
  }

  void run() {
    allocate();
    reference_timing();
    if (!start_runner() || !load()) return;
    try {
      if (!calls()) return;
    } catch (const std::exception& e) {
      blame_after_failure(e);
      return;
    }
    o_.speedup = o_.candidate_timing.median_us > 0 ? o_.reference_timing.median_us / o_.candidate_timing.median_us : 0;
    if (!fast_enough()) return;
    o_.status = Status::ok;
  }

 private:
  enum class Phase { trial, warmup, sample, extra };

  // Views of this task's tensors in the judge's workspace (grown if the task needs more), as
  // many slots and kept sets as fit beside the reference's and the candidate's own memory.
  void allocate() {
    auto [n, k] = fit_slots(dev_.is_gpu() ? 4 : 2, settings_.getVerifiedTimedCalls(), dev_.free_memory(),
                            workspace_.bytes(), [&](size_t n, size_t k) { return checker_.bytes_for(n, k); });
    slots_ = checker_.make_slots(n, workspace_, arena_, k);
  }

  void reference_timing() {
    std::string key = std::string(req_.getTask().getName().cStr()) + "@" + dev_.name();
    if (req_.getHasReferenceTiming()) {
      o_.reference_timing = from_proto(req_.getReferenceTiming());
    } else if (auto it = cache_.find(key); it != cache_.end()) {
      o_.reference_timing = it->second;
    } else {
      // In the judge, where candidate code never runs, before any runner holds the candidate.
      checker_.fill(slots_[0], mix_seed(o_.seed, 0x7E5Full));
      quiet();
      GpuLock::Timing timing(lock_);
      o_.reference_timing = cache_[key] =
          dev_.time_reference([&](size_t) { checker_.reference(slots_[0]); }, 1, ts_).stats;
    }
    // Warms LibTorch's caching allocator for the reference, so a runner that later takes all
    // device memory cannot starve the judge's comparisons.
    checker_.fill(slots_[0], o_.seed);
    (void)checker_.reference(slots_[0]);
  }

  // On the CPU, no runner of this judge's is starting while something is timed (the pool starts
  // replacements after an evaluation; one still starting is waited for, briefly). On the GPU the
  // spares start in the driver's time, too slowly to wait for.
  void quiet() {
    if (!dev_.is_gpu()) pool_.settle(1);
  }

  bool start_runner() {
    std::string why;
    double waited = 0;
    runner_ = pool_.take(&why, &waited);
    o_.stages.runner_wait_us = waited;
    if (!runner_) {
      o_.status = Status::infra_error;
      o_.feedback = why;
      return false;
    }
    o_.stages.runner_start_us = runner_->start_us;
    std::vector<double> over;
    {
      quiet();
      GpuLock::Timing timing(lock_);  // the overhead as the timed calls see it: nothing else on the device
      for (unsigned i = 0; i < kCalibrationCalls; ++i) {
        double x = 0;
        if (!calibrate(*runner_, &x)) {
          o_.status = Status::infra_error;
          o_.feedback = "the candidate runner failed its calibration: " + runner_->stderr_tail();
          return false;
        }
        if (i > 0) over.push_back(x);  // the first call pays one-time costs
      }
    }
    overhead_us_ = quantile(over, 0.5);
    baseline_threads_ = runner_->threads();
    return true;
  }

  // One trusted no-op call: what the judge observes beyond what the runner reports.
  bool calibrate(Runner& r, double* excess) {
    Command c;
    c.op = runner::Op::calibrate;
    c.seq = ++seq_;
    Reply reply;
    double wall = 0;
    dev_.before_call();
    double cpu0 = window_start(r);
    auto w = r.request(c, {}, deadline_, &reply, &wall);
    if (w != Runner::Wait::reply || reply.seq != c.seq || reply.kind != ReplyKind::called) return false;
    *excess = observed_us(r, wall, cpu0) - reply.elapsed_us;
    return true;
  }

  // The overhead again, now, on a spare runner that never held a candidate and shares the
  // candidate runner's core: the machine's load at this moment, which the candidate cannot touch.
  void recalibrate(bool record = true) {
    Runner* spare = pool_.idle_spare();
    double x = 0;
    if (spare && calibrate(*spare, &x) && record) live_overhead_.push_back(x);
  }

  bool load() {
    auto t0 = Clock::now();
    std::string path = req_.getLibraryPath();
    if (!imports_allowed(path, o_)) return false;  // before any runner sees it
    int lib = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (lib < 0) throw_errno("open " + path);
    Command c = checker_.load_command(slots_);
    c.seq = ++seq_;
    c.memory_limit_bytes = settings_.getMemoryMb() << 20;
    std::memcpy(c.cuda_ipc_handle, arena_->ipc_handle.data(), sizeof c.cuda_ipc_handle);
    std::vector<int> fds = {lib};
    if (arena_->fd >= 0) fds.push_back(arena_->fd);
    Reply r;
    double wall = 0;
    auto w = runner_->request(c, fds, deadline_, &r, &wall);
    ::close(lib);
    runner_->cpu_mark_us = -1;  // loading (the candidate's constructors) is not a call's
    o_.stages.load_us = micros_since(t0);
    if (w != Runner::Wait::reply) return runner_failed(w, "while the candidate was loaded");
    o_.stages.runner_map_us = r.map_us;
    o_.stages.runner_library_us = r.library_us;
    if (r.kind == ReplyKind::failed) return fail(Status::runtime_error, "", r.message);
    if (r.kind != ReplyKind::loaded || r.seq != c.seq)
      return fail(Status::cheat_detected, "forged_reply", "the runner answered out of protocol while loading");
    return threads_unchanged();
  }

  bool calls() {
    auto t_check = Clock::now();
    const uint32_t trials = settings_.getTrials();
    for (uint32_t t = 0; t < trials; ++t) {
      if (!call(Phase::trial, true, nullptr)) return false;
      // The rest of a slow candidate's trials is untimed time long enough to make spares' contexts
      // in, instead of before a timing that would wait for them (the second call: the first loads).
      if (t == 1) pool_.refill_during((trials - 2) * last_wall_us_ / 1000);
    }
    o_.stages.correctness_us = micros_since(t_check);

    std::vector<double> samples;
    if (!timed_phase(samples)) return false;
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

  // Warm-up and timed calls, the device the judge's alone (GpuLock): `samples` are the timings,
  // re-measured once when the first ones do not agree with what the judge observed.
  bool timed_phase(std::vector<double>& samples) {
    quiet();
    GpuLock::Timing timing(lock_);
    auto t_timing = Clock::now();
    for (unsigned i = 0; !warmup_done(i, micros_since(t_timing) / 1000.0, ts_); ++i) {
      if (!call(Phase::warmup, false, nullptr)) return false;
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
      live_overhead_.clear();
      samples.clear();
      if (!timed_calls(samples, true) || !timing_consistent(true)) return false;
    }
    o_.stages.timing_us = micros_since(t_timing);
    return true;
  }

  // Timed calls into `samples`, then the last one verified in place (its inputs too). Until the
  // timing is precise enough, a spare calibrated after every other call; `paired`: a fixed
  // number of calls, each followed by a calibration.
  bool timed_calls(std::vector<double>& samples, bool paired) {
    const size_t fixed = std::max<uint32_t>(ts_.min_samples, 10);
    auto t0 = Clock::now();
    for (;;) {
      double elapsed = 0;
      // The stop decision is taken after the call; a call that turns out last is verified then.
      if (!call(Phase::sample, false, &elapsed)) return false;
      samples.push_back(elapsed);
      if (paired || samples.size() % 2 == 1) recalibrate();  // every other call: enough to follow the load
      if (paired ? samples.size() >= fixed : timing_done(samples, ts_, micros_since(t0) / 1000.0)) break;
    }
    ++o_.verified_calls;
    return checker_.verify(slots_[last_slot_], false, "timed_call_wrong");
  }

  // One call: fresh inputs, poisoned outputs, the runner's reply, and the judge's checks.
  bool call(Phase phase, bool verify, double* elapsed_us) {
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
    Reply r;
    double wall = 0;
    // The first call may autotune, load modules, build caches: its budget is the deadline.
    const double limit_ms = index == 0 ? 0 : 10 * call_limit_ms();
    // A spare making its CUDA context can stall the call (the driver's work): not held against it.
    const bool disturbed = dev_.is_gpu() && pool_.starting();
    auto until = limit_ms > 0 ? std::min(deadline_, after_seconds(limit_ms / 1000)) : deadline_;
    const LoadClock load(*runner_, call_limit_ms() > 0);
    const auto call_start = Clock::now();
    auto w = runner_->request(c, {}, until, &r, &wall);
    // Past 10x the limit by the wall clock but not by the call's own time: the machine's load held
    // it back, so it gets the rest of its 10x (within the deadline).
    bool waited_on = false;
    while (w == Runner::Wait::deadline && until < deadline_) {
      const double left_us = 1000 * limit_ms - load.own_us(micros_since(call_start));
      if (left_us <= 0) break;
      until = std::min(deadline_, after_seconds(left_us / 1e6));
      w = runner_->await(until, &r);
      waited_on = true;
    }
    if (waited_on) wall = micros_since(call_start);
    if (w == Runner::Wait::deadline) {
      // Stopped at 10x the call limit, or by the evaluation's deadline after running past the
      // limit: the same verdict either way (which comes first depends on how loaded the machine
      // is, and a policy conditioned on the verdict must not see the load).
      const bool over_limit = call_limit_ms() > 0 && load.own_us(micros_since(call_start)) > 1000 * call_limit_ms();
      if (until < deadline_ || over_limit) {
        char buf[320];
        if (index == 0)
          std::snprintf(buf, sizeof buf,
                        "call 1 did not end within the evaluation's %g s deadline (the first call's budget; later "
                        "calls' limit: %s): stopped as too slow",
                        static_cast<double>(settings_.getDeadlineS()), limit_text().c_str());
        else
          std::snprintf(buf, sizeof buf,
                        "call %zu took longer than %.1f ms, 10 x its limit of %s: stopped as too slow", index + 1,
                        10 * call_limit_ms(), limit_text().c_str());
        return fail(Status::timeout, "too_slow", buf);
      }
    }
    if (w != Runner::Wait::reply) return runner_failed(w, "during call " + std::to_string(index + 1));
    last_wall_us_ = wall;
    double observed = observed_us(*runner_, wall, cpu0);
    if (phase == Phase::trial) o_.stages.candidate_calls_us += wall;
    if (index > 0 && call_limit_ms() > 0 && !disturbed) {
      // The call's own time: to the kernel's stamp on the reply (this judge's wait for a CPU
      // before it reads the reply is not the call's), less the runner's wait; on the CPU never
      // less than the runner's CPU time in it.
      const double replied_us = runner_->reply_after_us();
      double own_us = load.own_us(replied_us >= 0 ? std::min(replied_us, wall) : wall);
      if (!dev_.is_gpu()) own_us = std::max(own_us, observed);
      ++later_calls_;
      slow_calls_ += own_us > 1000 * call_limit_ms();
      if (later_calls_ >= 3 && 2 * slow_calls_ > later_calls_) {
        char buf[320];
        std::snprintf(buf, sizeof buf, "call %zu took %.1f ms; %d of calls 2-%zu took longer than their limit of %s: "
                      "stopped as too slow", index + 1, own_us / 1000, slow_calls_, index + 1, limit_text().c_str());
        return fail(Status::timeout, "too_slow", buf);
      }
    }
    if (r.kind != ReplyKind::called || r.seq != c.seq)
      return fail(Status::cheat_detected, "forged_reply",
                  "the runner's reply does not answer the judge's request (a forged or replayed reply)");
    if (r.cuda_error != 0) return fail(Status::runtime_error, "", std::string("CUDA error: ") + r.message);
    if (r.rc != 0) {
      std::string msg = r.rc == runner::kEscapedException ? std::string("an exception escaped leap_kernel: ") + r.message
                                                          : "leap_kernel returned error code " + std::to_string(r.rc);
      return fail(Status::runtime_error, "", msg);
    }
    if (!threads_unchanged()) return false;
    if (auto err = dev_.synchronize(); !err.empty()) throw LeapError(err);
    const char* wrong_check = phase == Phase::trial ? "" : "timed_call_wrong";
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
      if (!checker_.verify(slot, phase == Phase::trial, wrong_check)) return false;
    }
    if (phase == Phase::sample) {
      observed_.push_back(observed);
      reported_.push_back(r.elapsed_us);
      // CPU: the kernel's account of the runner's CPU time for the call, not the runner's word.
      // GPU: the runner's events (the precise figure) no lower than what the judge's own clock
      // allows for this call: a forged or escaping call gains at most the allowance, whatever
      // share of calls forge.
      *elapsed_us = dev_.is_gpu() ? std::max(r.elapsed_us, observed - overhead_us_ - allowed_excess_us(r.elapsed_us))
                                  : std::max(observed - overhead_us_, 0.0);
    }
    return true;
  }

  // A call's limit: call_limit_ratio x the reference, never under the floor; 0: only the deadline.
  // A later call running ten times over it is stopped (the first call's budget is the deadline: it
  // loads modules, faults pages in, autotunes, builds what it caches). From the third call after the first, the
  // evaluation ends once most of those calls were over it: a slow candidate is over it on every
  // call, an honest one only where a call stalled while the driver created or tore down another
  // runner's context (seen on the H200: GEMM examples at 140-280 ms, 100x their reference); calls
  // made while one of this judge's spares was starting are not counted.
  double call_limit_ms() const {
    const double ratio = settings_.getCallLimitRatio();
    if (ratio <= 0 || o_.reference_timing.median_us <= 0) return 0;
    return std::max(ratio * o_.reference_timing.median_us / 1000, settings_.getCallLimitFloorMs());
  }

  // "5.0 ms = max(100 x reference 26.6 us, floor 5.0 ms) ([eval] call_limit_ratio, call_limit_floor_ms)"
  std::string limit_text() const {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%.1f ms = max(%g x reference %.1f us, floor %.1f ms) ([eval] call_limit_ratio, "
                  "call_limit_floor_ms)", call_limit_ms(), settings_.getCallLimitRatio(), o_.reference_timing.median_us,
                  static_cast<double>(settings_.getCallLimitFloorMs()));
    return buf;
  }

  // A task may require a correct kernel to be fast (KernelBench's fast_p): judged on the
  // measured speedup, once the timing is done.
  bool fast_enough() {
    const double need = req_.getTask().getMinSpeedup();
    if (need <= 0 || o_.speedup >= need) return true;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "correct, but %.3fx the reference's speed (%.1f us against %.1f us; this task needs at least %.3gx): "
                  "too slow",
                  o_.speedup, o_.candidate_timing.median_us, o_.reference_timing.median_us, need);
    return fail(Status::timeout, "too_slow", buf);
  }

  // A call's own time against its limit: the wall clock less the time the runner's thread was
  // ready to run but waited for a CPU (the kernel's scheduler account). A busy machine stretches
  // a call's wall time, not this; a candidate that sleeps or waits on the device is not waiting
  // for a CPU, so it keeps all of its time. Where the kernel keeps no account, the wall clock.
  class LoadClock {
   public:
    // Inactive (no call limit): reads nothing, the wall clock.
    LoadClock(Runner& r, bool active) : runner_(r), waited0_(active ? r.queue_wait_us() : -1) {}
    double own_us(double wall_us) const {
      const double waited = waited0_ >= 0 ? std::max(runner_.queue_wait_us() - waited0_, 0.0) : 0.0;
      return std::max(wall_us - waited, 0.0);
    }

   private:
    Runner& runner_;
    double waited0_;
  };

  // What the judge itself saw of a call: on the GPU its wall clock (the runner synchronises the
  // whole device before answering); on the CPU the kernel's account of the runner's CPU time,
  // which the single-threaded candidate cannot forge and other load on the machine does not inflate.
  // On the CPU each call's window ends where the runner's next one starts (Runner::cpu_mark_us),
  // so no CPU time of a runner's falls between two of its windows.
  double observed_us(Runner& r, double wall_us, double cpu_before_us) {
    if (dev_.is_gpu()) return wall_us;
    r.cpu_mark_us = r.cpu_time_us();
    return r.cpu_mark_us - cpu_before_us;
  }
  double window_start(Runner& r) { return dev_.is_gpu() ? 0 : r.cpu_mark_us >= 0 ? r.cpu_mark_us : r.cpu_time_us(); }

  // Kills the runner; on the GPU, an arena its work may still reach is never handed to the next
  // evaluation (Workspace::quarantine).
  void retire_runner() {
    if (dev_.is_gpu() && !runner_->settled) workspace_.quarantine();
    pool_.retire(std::move(runner_), arena_);
  }

  bool threads_unchanged() {
    int now = runner_->threads();
    if (now <= baseline_threads_) return true;
    runner_->settled = false;  // a thread may have launched work
    return fail(Status::cheat_detected, "threads_left_running",
                std::to_string(now - baseline_threads_) +
                    " thread(s) the candidate started were running outside its calls");
  }

  // How far the judge's observation of a call may exceed the runner's report before the report
  // is not believed: noise of the judge's own clock and wake-up.
  double allowed_excess_us(double reported_us) const {
    const double slack_us = settings_.getTimingSlackUs() > 0 ? settings_.getTimingSlackUs() : dev_.is_gpu() ? 50 : 20;
    return std::max(settings_.getTimingSlack() * reported_us, slack_us);
  }

  // The runner's own timing is the candidate's to forge; what the judge observed of the same call
  // bounds it: observed = overhead + the call (the overhead measured beside the timed calls on a
  // spare runner, under the same load), and on the GPU device-wide
  // synchronisation puts work launched on other streams into the wall but not into the evaluator
  // stream's events.
  bool timing_consistent(bool final) {
    if (live_overhead_.size() >= 3) overhead_us_ = quantile(live_overhead_, 0.5);  // else the one before the load
    std::vector<double> excess;
    for (size_t i = 0; i < observed_.size(); ++i) excess.push_back(observed_[i] - reported_[i] - overhead_us_);
    // The median call: an escape on most calls shows, a preempted judge on some does not (and a
    // call's sample is bounded by the judge's clock anyway).
    o_.wall_excess_us = quantile(excess, 0.5);
    double reported = quantile(reported_, 0.5);
    double allowed = allowed_excess_us(reported);
    if (o_.wall_excess_us <= allowed) return true;
    if (!final) return false;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "the judge observed %.1f us per call more than the %.1f us the runner reported (overhead %.1f us "
                  "measured on runners that never held a candidate; allowed %.1f us)",
                  o_.wall_excess_us, reported, overhead_us_, allowed);
    return dev_.is_gpu() ? fail(Status::cheat_detected, "stream_escape",
                                std::string(buf) + ": work ran outside the evaluator's stream")
                         : fail(Status::cheat_detected, "timing_forged", std::string(buf) + ": the timing was forged");
  }

  bool runner_failed(Runner::Wait w, const std::string& when) {
    if (w == Runner::Wait::deadline)
      return fail(Status::timeout, "",
                  "the evaluation exceeded its " + std::to_string(settings_.getDeadlineS()) + " s deadline " + when +
                      "; the candidate's runner was killed");
    if (w == Runner::Wait::malformed)
      return fail(Status::cheat_detected, "forged_reply", "the runner sent a malformed reply " + when);
    std::string tail = runner_->stderr_tail();
    const std::string how = runner_->how_it_ended(0.5);
    return fail(Status::runtime_error, "",
                "the candidate's process ended " + when + (how.empty() ? "" : ", " + how) +
                    (tail.empty() ? "" : "; its last output:\n" + tail));
  }

  // A judge-side failure once candidate code has run: the candidate's fault if the judge works
  // again as soon as the runner is gone (it held the device's memory, say), else leap's.
  void blame_after_failure(const std::exception& e) {
    if (runner_) retire_runner();
    pool_.wait_idle(0.5);
    std::string err = dev_.synchronize();
    try {
      if (err.empty()) (void)checker_.reference(slots_[0]);
    } catch (const std::exception& again) {
      err = again.what();
    }
    if (!err.empty()) throw LeapError(std::string("the judge failed: ") + e.what());
    fail(Status::runtime_error, "resource_exhaustion",
         std::string("the judge's work failed while the candidate's runner was alive (") + e.what() +
             ") and succeeded once it was gone");
  }

  bool fail(Status s, const std::string& check, const std::string& feedback) {
    o_.status = s;
    o_.check = check;
    o_.feedback = feedback;
    return false;
  }

  proto::EvalRequest::Reader req_;
  proto::EvalSettings::Reader settings_;
  Device& dev_;
  RunnerPool& pool_;
  ReferenceTimings& cache_;
  Workspace& workspace_;
  GpuLock& lock_;
  EvalOutcome& o_;
  TimingSettings ts_;
  Checker checker_;
  Slots slots_;
  std::shared_ptr<Arena> arena_;
  std::unique_ptr<Runner> runner_;
  Clock::time_point deadline_;
  std::mt19937_64 keep_rng_;
  uint64_t seq_ = 0;
  double overhead_us_ = 0;
  int baseline_threads_ = 0;
  size_t last_slot_ = 0;
  int later_calls_ = 0, slow_calls_ = 0;  // calls after the first (none disturbed), and those over call_limit_ms()
  double last_wall_us_ = 0;
  std::vector<double> observed_, reported_, live_overhead_;
};

}  // namespace

EvalOutcome evaluate_request(proto::EvalRequest::Reader req, Device& dev, RunnerPool& pool, ReferenceTimings& cache,
                             Workspace& workspace, GpuLock& lock) {
  auto t_start = Clock::now();
  EvalOutcome o;
  o.id = req.getId();
  o.task = req.getTask().getName();
  o.candidate = req.getCandidateName();
  o.backend = from_proto(req.getTask().getBackend());
  o.status = Status::infra_error;
  // The last candidate's runner must be gone before this evaluation allocates: a runner that
  // took all device memory would otherwise fail the judge's next allocation (and the blame would
  // fall on this candidate).
  lock.shared();  // held until this candidate's runner is gone (after the reply: judge_idle)
  auto t_wait = Clock::now();
  // A runner the judge has not seen exit may still have GPU work writing into the arena: the
  // judge concludes nothing from the runner's word here, and the arena is not reused.
  if (!pool.wait_idle(2) && dev.is_gpu()) workspace.quarantine();
  o.stages.retired_wait_us = micros_since(t_wait);
  {
    Judgement j(req, dev, pool, cache, workspace, lock, o);
    j.run();
  }
  o.stages.gpu_lock_wait_us = lock.take_waited_us();
  o.stages.eval_us = micros_since(t_start);
  return o;
}

void judge_idle(RunnerPool& pool, GpuLock& lock) {
  // The retired runner's teardown is GPU work too: judges sharing the device time only once it is
  // over. Bounded: a runner that will not die is the next evaluation's retired wait.
  pool.wait_idle(2);
  pool.top_up();  // a batch of spares once few are left (the CPU's: the one just used)
  lock.release();
}

}  // namespace leap
