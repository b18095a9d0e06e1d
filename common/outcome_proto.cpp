#include "common/outcome_proto.h"

namespace leap {

proto::Backend to_proto(Backend b) { return b == Backend::cpu ? proto::Backend::CPU : proto::Backend::CUDA; }
Backend from_proto(proto::Backend b) { return b == proto::Backend::CPU ? Backend::cpu : Backend::cuda; }

void to_proto(const EvalConfig& e, proto::EvalSettings::Builder s) {
  s.setTrials(e.trials);
  s.setSeed(e.seed);
  s.setWarmupCalls(e.warmup_calls);
  s.setWarmupMs(e.warmup_ms);
  s.setMinSamples(e.min_samples);
  s.setOverBudgetSamples(e.over_budget_samples);
  s.setPreciseStopMs(e.precise_stop_ms);
  s.setMaxSamples(e.max_samples);
  s.setTimingBudgetMs(e.timing_budget_ms);
  s.setRseTarget(e.rse_target);
  s.setSpeedupBound(e.speedup_bound);
  s.setVerifiedTimedCalls(e.verified_timed_calls);
  s.setTimingSlack(e.timing_slack);
  s.setTimingSlackUs(e.timing_slack_us);
  s.setCallLimitRatio(e.call_limit_ratio);
  s.setCallLimitFloorMs(e.call_limit_floor_ms);
  s.setMaxFeedbackBytes(e.max_feedback_bytes);
  s.setRequireCustomKernel(e.require_custom_kernel);
  s.setSlowStopRatio(e.slow_stop_ratio);
  s.setProfile(e.profile);
}

EvalConfig from_proto(proto::EvalSettings::Reader s) {
  EvalConfig e;
  e.trials = s.getTrials();
  e.seed = s.getSeed();
  e.warmup_calls = s.getWarmupCalls();
  e.warmup_ms = s.getWarmupMs();
  e.min_samples = s.getMinSamples();
  e.over_budget_samples = s.getOverBudgetSamples();
  e.precise_stop_ms = s.getPreciseStopMs();
  e.max_samples = s.getMaxSamples();
  e.timing_budget_ms = s.getTimingBudgetMs();
  e.rse_target = s.getRseTarget();
  e.speedup_bound = s.getSpeedupBound();
  e.verified_timed_calls = s.getVerifiedTimedCalls();
  e.timing_slack = s.getTimingSlack();
  e.timing_slack_us = s.getTimingSlackUs();
  e.call_limit_ratio = s.getCallLimitRatio();
  e.call_limit_floor_ms = s.getCallLimitFloorMs();
  e.max_feedback_bytes = s.getMaxFeedbackBytes();
  e.require_custom_kernel = s.getRequireCustomKernel();
  e.slow_stop_ratio = s.getSlowStopRatio();
  e.profile = s.getProfile();
  return e;
}

void to_proto(const TimingStats& t, proto::TimingStats::Builder b) {
  b.setMedianUs(t.median_us);
  b.setMeanUs(t.mean_us);
  b.setStddevUs(t.stddev_us);
  b.setP10Us(t.p10_us);
  b.setP90Us(t.p90_us);
  b.setRse(t.rse);
  b.setSamples(t.samples);
  b.setTotalUs(t.total_us);
}

TimingStats from_proto(proto::TimingStats::Reader r) {
  TimingStats t;
  t.median_us = r.getMedianUs();
  t.mean_us = r.getMeanUs();
  t.stddev_us = r.getStddevUs();
  t.p10_us = r.getP10Us();
  t.p90_us = r.getP90Us();
  t.rse = r.getRse();
  t.samples = r.getSamples();
  t.total_us = r.getTotalUs();
  return t;
}

// The two enums follow the schema's order (static_asserts below); an unknown value from a newer
// peer reads as leap's failure, never as a verdict.
static_assert(static_cast<int>(proto::Status::INFRA_ERROR) == static_cast<int>(Status::infra_error));
static_assert(static_cast<int>(proto::Check::VENDOR_LIBRARY) == static_cast<int>(kLastCheck));

proto::Status to_proto(Status s) { return static_cast<proto::Status>(static_cast<int>(s)); }
Status from_proto(proto::Status s) {
  const int v = static_cast<int>(s);
  return v <= static_cast<int>(Status::infra_error) ? static_cast<Status>(v) : Status::infra_error;
}
proto::Check to_proto(Check c) { return static_cast<proto::Check>(static_cast<int>(c)); }
Check from_proto(proto::Check c) {
  const int v = static_cast<int>(c);
  return v <= static_cast<int>(kLastCheck) ? static_cast<Check>(v) : Check::none;
}

void to_proto(const EvalOutcome& o, proto::TurnOutcome::Builder b) {
  b.setId(o.id);
  b.setTask(o.task);
  b.setCandidate(o.candidate);
  b.setBackend(to_proto(o.backend));
  b.setStatus(to_proto(o.status));
  b.setCheck(to_proto(o.check));
  b.setFeedback(o.feedback);
  auto trials = b.initTrials(static_cast<unsigned>(o.trials.size()));
  for (unsigned i = 0; i < o.trials.size(); ++i) {
    const auto& t = o.trials[i];
    auto tb = trials[i];
    tb.setIndex(t.index);
    tb.setPassed(t.passed);
    tb.setMaxAbsError(t.max_abs_error);
    tb.setMaxRelError(t.max_rel_error);
    tb.setFirstBadIndex(t.first_bad_index);
    tb.setMismatches(t.mismatches);
  }
  to_proto(o.candidate_timing, b.initCandidateTiming());
  to_proto(o.reference_timing, b.initReferenceTiming());
  b.setSpeedup(o.speedup);
  b.setSpeedupFlagged(o.speedup_flagged);
  b.setCacheHit(o.cache_hit);
  auto s = b.initStages();
  s.setQueueWaitUs(o.stages.queue_wait_us);
  s.setCompileUs(o.stages.compile_us);
  s.setLoadUs(o.stages.load_us);
  s.setCorrectnessUs(o.stages.correctness_us);
  s.setTimingUs(o.stages.timing_us);
  s.setEvalUs(o.stages.eval_us);
  s.setTotalUs(o.stages.total_us);
  s.setCandidateCallsUs(o.stages.candidate_calls_us);
  s.setCompileStartS(o.stages.compile_start_s);
  s.setCompileEndS(o.stages.compile_end_s);
  s.setEvalStartS(o.stages.eval_start_s);
  s.setEvalEndS(o.stages.eval_end_s);
  s.setRunnerWaitUs(o.stages.runner_wait_us);
  s.setRunnerMapUs(o.stages.runner_map_us);
  s.setRunnerLibraryUs(o.stages.runner_library_us);
  s.setKeptVerifyUs(o.stages.kept_verify_us);
  s.setRetiredWaitUs(o.stages.retired_wait_us);
  s.setGpuLockWaitUs(o.stages.gpu_lock_wait_us);
  s.setRunnerStartUs(o.stages.runner_start_us);
  s.setCompileHostUs(o.stages.compile_host_us);
  s.setCompileDeviceUs(o.stages.compile_device_us);
  b.setRecycleEvaluator(o.recycle_evaluator);
  b.setCompiler(o.compiler);
  b.setSeed(o.seed);
  b.setCalls(o.calls);
  b.setVerifiedCalls(o.verified_calls);
  b.setTrialCalls(o.trial_calls);
  b.setWarmupCalls(o.warmup_calls);
  auto ks = b.initKernels(static_cast<unsigned>(o.kernels.size()));
  for (unsigned i = 0; i < o.kernels.size(); ++i) {
    const KernelProfile& k = o.kernels[i];
    auto kb = ks[i];
    kb.setKernel(k.kernel);
    kb.setDurationUs(k.duration_us);
    kb.setOccupancyPct(k.occupancy_pct);
    kb.setDramPct(k.dram_pct);
    kb.setMemoryPct(k.memory_pct);
    kb.setSmPct(k.sm_pct);
    kb.setRegisters(k.registers);
    kb.setSharedBytes(k.shared_bytes);
    kb.setBlock(k.block);
    kb.setGrid(k.grid);
  }
  b.setBottleneck(o.bottleneck);
  b.setProfileUs(o.profile_us);
  b.setProfileError(o.profile_error);
  b.setWallExcessUs(o.wall_excess_us);
}

EvalOutcome from_proto(proto::TurnOutcome::Reader r) {
  EvalOutcome o;
  o.id = r.getId();
  o.task = r.getTask();
  o.candidate = r.getCandidate();
  o.backend = from_proto(r.getBackend());
  o.status = from_proto(r.getStatus());
  o.check = from_proto(r.getCheck());
  o.feedback = r.getFeedback();
  for (auto t : r.getTrials())
    o.trials.push_back({t.getIndex(), t.getPassed(), t.getMaxAbsError(), t.getMaxRelError(), t.getFirstBadIndex(),
                        t.getMismatches()});
  o.candidate_timing = from_proto(r.getCandidateTiming());
  o.reference_timing = from_proto(r.getReferenceTiming());
  o.speedup = r.getSpeedup();
  o.speedup_flagged = r.getSpeedupFlagged();
  o.cache_hit = r.getCacheHit();
  auto s = r.getStages();
  auto& stages = o.stages;  // by name: the struct's order is not the schema's
  stages.queue_wait_us = s.getQueueWaitUs();
  stages.compile_us = s.getCompileUs();
  stages.load_us = s.getLoadUs();
  stages.correctness_us = s.getCorrectnessUs();
  stages.timing_us = s.getTimingUs();
  stages.eval_us = s.getEvalUs();
  stages.total_us = s.getTotalUs();
  stages.candidate_calls_us = s.getCandidateCallsUs();
  stages.compile_start_s = s.getCompileStartS();
  stages.compile_end_s = s.getCompileEndS();
  stages.eval_start_s = s.getEvalStartS();
  stages.eval_end_s = s.getEvalEndS();
  stages.runner_wait_us = s.getRunnerWaitUs();
  stages.runner_start_us = s.getRunnerStartUs();
  stages.runner_map_us = s.getRunnerMapUs();
  stages.runner_library_us = s.getRunnerLibraryUs();
  stages.kept_verify_us = s.getKeptVerifyUs();
  stages.retired_wait_us = s.getRetiredWaitUs();
  stages.gpu_lock_wait_us = s.getGpuLockWaitUs();
  stages.compile_host_us = s.getCompileHostUs();
  stages.compile_device_us = s.getCompileDeviceUs();
  o.recycle_evaluator = r.getRecycleEvaluator();
  o.compiler = r.getCompiler();
  o.seed = r.getSeed();
  o.calls = r.getCalls();
  o.verified_calls = r.getVerifiedCalls();
  o.trial_calls = r.getTrialCalls();
  o.warmup_calls = r.getWarmupCalls();
  for (auto k : r.getKernels())
    o.kernels.push_back({k.getKernel(), k.getDurationUs(), k.getOccupancyPct(), k.getDramPct(), k.getMemoryPct(),
                         k.getSmPct(), k.getRegisters(), k.getSharedBytes(), k.getBlock(), k.getGrid()});
  o.bottleneck = r.getBottleneck();
  o.profile_us = r.getProfileUs();
  o.profile_error = r.getProfileError();
  o.wall_excess_us = r.getWallExcessUs();
  return o;
}

}  // namespace leap
