#include "common/outcome_proto.h"

namespace leap {

proto::Backend to_proto(Backend b) { return b == Backend::cpu ? proto::Backend::CPU : proto::Backend::CUDA; }
Backend from_proto(proto::Backend b) { return b == proto::Backend::CPU ? Backend::cpu : Backend::cuda; }

void to_proto(const EvalConfig& e, proto::EvalSettings::Builder s) {
#define LEAP_EVAL_SET(type, name, wire, value, range, meaning) s.set##wire(e.name);
  LEAP_EVAL_FIELDS(LEAP_EVAL_SET)
#undef LEAP_EVAL_SET
}

EvalConfig from_proto(proto::EvalSettings::Reader s) {
  EvalConfig e;
#define LEAP_EVAL_GET(type, name, wire, value, range, meaning) e.name = s.get##wire();
  LEAP_EVAL_FIELDS(LEAP_EVAL_GET)
#undef LEAP_EVAL_GET
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

#define LEAP_OUTCOME_SET(type, name, wire, value) to.set##wire(from.name);
#define LEAP_PART_SET(type, name, wire, value) b.set##wire(t.name);
#define LEAP_PART_GET(type, name, wire, value) t.name = r.get##wire();
#define LEAP_OUTCOME_GET(type, name, wire, value) to.name = from.get##wire();

void to_proto(const EvalOutcome& from, proto::TurnOutcome::Builder to) {
  LEAP_OUTCOME_FIELDS(LEAP_OUTCOME_SET)
  to.setBackend(to_proto(from.backend));
  to.setStatus(to_proto(from.status));
  to.setCheck(to_proto(from.check));
  auto trials = to.initTrials(static_cast<unsigned>(from.trials.size()));
  for (unsigned i = 0; i < from.trials.size(); ++i) {
    const TrialResult& t = from.trials[i];
    auto b = trials[i];
    LEAP_TRIAL_FIELDS(LEAP_PART_SET)
  }
  to_proto(from.candidate_timing, to.initCandidateTiming());
  to_proto(from.reference_timing, to.initReferenceTiming());
  {
    auto b = to.initStages();
    const StageTimes& t = from.stages;
    LEAP_STAGE_FIELDS(LEAP_PART_SET)
  }
  auto kernels = to.initKernels(static_cast<unsigned>(from.kernels.size()));
  for (unsigned i = 0; i < from.kernels.size(); ++i) {
    const KernelProfile& t = from.kernels[i];
    auto b = kernels[i];
    LEAP_KERNEL_FIELDS(LEAP_PART_SET)
  }
  to.setRecycleEvaluator(from.recycle_evaluator);
}

EvalOutcome from_proto(proto::TurnOutcome::Reader from) {
  EvalOutcome to;
  LEAP_OUTCOME_FIELDS(LEAP_OUTCOME_GET)
  to.backend = from_proto(from.getBackend());
  to.status = from_proto(from.getStatus());
  to.check = from_proto(from.getCheck());
  for (auto r : from.getTrials()) {
    TrialResult& t = to.trials.emplace_back();
    LEAP_TRIAL_FIELDS(LEAP_PART_GET)
  }
  to.candidate_timing = from_proto(from.getCandidateTiming());
  to.reference_timing = from_proto(from.getReferenceTiming());
  {
    auto r = from.getStages();
    StageTimes& t = to.stages;
    LEAP_STAGE_FIELDS(LEAP_PART_GET)
  }
  for (auto r : from.getKernels()) {
    KernelProfile& t = to.kernels.emplace_back();
    LEAP_KERNEL_FIELDS(LEAP_PART_GET)
  }
  to.recycle_evaluator = from.getRecycleEvaluator();
  return to;
}

}  // namespace leap
