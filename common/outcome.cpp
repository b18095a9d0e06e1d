#include "common/outcome.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace leap {

std::string to_string(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::compile_error: return "compile_error";
    case Status::runtime_error: return "runtime_error";
    case Status::timeout: return "timeout";
    case Status::wrong_answer: return "wrong_answer";
    case Status::cheat_detected: return "cheat_detected";
    case Status::infra_error: return "infra_error";
  }
  return "?";
}

std::optional<Status> status_from(const std::string& s) {
  for (auto st : {Status::ok, Status::compile_error, Status::runtime_error, Status::timeout, Status::wrong_answer,
                  Status::cheat_detected, Status::infra_error})
    if (to_string(st) == s) return st;
  return std::nullopt;
}

std::string to_string(Check c) {
  switch (c) {
    case Check::none: return "";
    case Check::too_slow: return "too_slow";
    case Check::resource_exhaustion: return "resource_exhaustion";
    case Check::forbidden_import: return "forbidden_import";
    case Check::forged_reply: return "forged_reply";
    case Check::input_mutation: return "input_mutation";
    case Check::output_reuse: return "output_reuse";
    case Check::partial_write: return "partial_write";
    case Check::skipped_work: return "skipped_work";
    case Check::stream_escape: return "stream_escape";
    case Check::threads_left_running: return "threads_left_running";
    case Check::timed_call_wrong: return "timed_call_wrong";
    case Check::timing_forged: return "timing_forged";
    case Check::no_custom_kernel: return "no_custom_kernel";
    case Check::vendor_library: return "vendor_library";
  }
  return "?";
}

std::optional<Check> check_from(const std::string& s) {
  for (int i = 0; i <= static_cast<int>(kLastCheck); ++i)
    if (to_string(static_cast<Check>(i)) == s) return static_cast<Check>(i);
  return std::nullopt;
}

std::string verdict_text(Status s, Check c) {
  return to_string(s) + (c == Check::none ? "" : "(" + to_string(c) + ")");
}

uint32_t EvalOutcome::correct_trials() const {
  uint32_t n = 0;
  for (const auto& t : trials) n += t.passed ? 1 : 0;
  return n;
}

namespace {

nlohmann::json timing_json(const TimingStats& t) {
  return {{"median_us", t.median_us}, {"mean_us", t.mean_us}, {"stddev_us", t.stddev_us}, {"p10_us", t.p10_us},
          {"p90_us", t.p90_us},       {"rse", t.rse},         {"samples", t.samples},     {"total_us", t.total_us}};
}

}  // namespace

EvalOutcome failed_outcome(std::string task, std::string candidate, Backend backend, Status status,
                           std::string feedback) {
  EvalOutcome o;
  o.task = std::move(task);
  o.candidate = std::move(candidate);
  o.backend = backend;
  o.status = status;
  o.feedback = std::move(feedback);
  return o;
}

#define LEAP_OUTCOME_JSON(type, name, wire, value) j[#name] = from.name;

// A part of the record: each field of its table under its own name.
#define LEAP_PART_TO_JSON(Part, FIELDS) \
  nlohmann::json to_json(const Part& from) { \
    nlohmann::json j;                        \
    FIELDS(LEAP_OUTCOME_JSON)                \
    return j;                                \
  }
LEAP_PART_TO_JSON(TrialResult, LEAP_TRIAL_FIELDS)
LEAP_PART_TO_JSON(KernelProfile, LEAP_KERNEL_FIELDS)
LEAP_PART_TO_JSON(StageTimes, LEAP_STAGE_FIELDS)
#undef LEAP_PART_TO_JSON

nlohmann::json to_json(const EvalOutcome& from) {
  nlohmann::json j;
  LEAP_OUTCOME_FIELDS(LEAP_OUTCOME_JSON)
  j["backend"] = to_string(from.backend);
  j["status"] = to_string(from.status);
  j["check"] = to_string(from.check);
  j["correct_trials"] = from.correct_trials();
  j["trials"] = nlohmann::json::array();
  for (const auto& t : from.trials) j["trials"].push_back(to_json(t));
  j["candidate_timing"] = timing_json(from.candidate_timing);
  j["reference_timing"] = timing_json(from.reference_timing);
  j["stages"] = to_json(from.stages);
  j["kernels"] = nlohmann::json::array();
  for (const auto& k : from.kernels) j["kernels"].push_back(to_json(k));
  return j;
}

double fast_p(const std::vector<EvalOutcome>& outcomes, double p) {
  size_t n = 0, judged = 0;
  for (const auto& o : outcomes) {
    judged += o.status != Status::infra_error;
    n += (o.status == Status::ok && o.speedup > p) ? 1 : 0;
  }
  return judged ? static_cast<double>(n) / static_cast<double>(judged) : 0;
}

EvalSummary summarize(const std::vector<EvalOutcome>& outcomes) {
  EvalSummary s;
  s.total = outcomes.size();
  double log_sum = 0;
  size_t correct = 0;
  for (const auto& o : outcomes) {
    s.by_status[o.status]++;
    if (o.status == Status::ok && o.speedup > 0) {
      ++correct;
      log_sum += std::log(o.speedup);
    }
  }
  s.infra_errors = s.by_status.count(Status::infra_error) ? s.by_status[Status::infra_error] : 0;
  s.judged = s.total - s.infra_errors;
  if (s.judged) s.correct_rate = static_cast<double>(s.by_status[Status::ok]) / static_cast<double>(s.judged);
  s.fast_0 = fast_p(outcomes, 0.0);
  s.fast_1 = fast_p(outcomes, 1.0);
  s.fast_1_5 = fast_p(outcomes, 1.5);
  s.fast_2 = fast_p(outcomes, 2.0);
  s.geomean_speedup = correct ? std::exp(log_sum / static_cast<double>(correct)) : 0;
  return s;
}

}  // namespace leap
