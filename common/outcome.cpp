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

nlohmann::json to_json(const EvalOutcome& o) {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : o.trials)
    trials.push_back({{"index", t.index},
                      {"passed", t.passed},
                      {"max_abs_error", t.max_abs_error},
                      {"max_rel_error", t.max_rel_error},
                      {"first_bad_index", t.first_bad_index},
                      {"mismatches", t.mismatches}});
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& k : o.kernels)
    kernels.push_back({{"kernel", k.kernel},
                       {"duration_us", k.duration_us},
                       {"occupancy_pct", k.occupancy_pct},
                       {"dram_pct", k.dram_pct},
                       {"memory_pct", k.memory_pct},
                       {"sm_pct", k.sm_pct},
                       {"registers", k.registers},
                       {"shared_bytes", k.shared_bytes},
                       {"block", k.block},
                       {"grid", k.grid}});
  const auto& s = o.stages;
  return {{"id", o.id},
          {"task", o.task},
          {"candidate", o.candidate},
          {"backend", to_string(o.backend)},
          {"status", to_string(o.status)},
          {"check", to_string(o.check)},
          {"feedback", o.feedback},
          {"correct_trials", o.correct_trials()},
          {"trials", trials},
          {"candidate_timing", timing_json(o.candidate_timing)},
          {"reference_timing", timing_json(o.reference_timing)},
          {"speedup", o.speedup},
          {"speedup_flagged", o.speedup_flagged},
          {"cache_hit", o.cache_hit},
          {"compiler", o.compiler},
          {"nvrtc_fallback", o.nvrtc_fallback},
          {"seed", o.seed},
          {"calls", o.calls},
          {"verified_calls", o.verified_calls},
          {"trial_calls", o.trial_calls},
          {"warmup_calls", o.warmup_calls},
          {"kernels", kernels},
          {"bottleneck", o.bottleneck},
          {"profile_us", o.profile_us},
          {"profile_error", o.profile_error},
          {"wall_excess_us", o.wall_excess_us},
          {"stages",
           {{"queue_wait_us", s.queue_wait_us},
            {"compile_us", s.compile_us},
            {"load_us", s.load_us},
            {"correctness_us", s.correctness_us},
            {"timing_us", s.timing_us},
            {"eval_us", s.eval_us},
            {"total_us", s.total_us},
            {"candidate_calls_us", s.candidate_calls_us},
            {"compile_start_s", s.compile_start_s},
            {"compile_end_s", s.compile_end_s},
            {"eval_start_s", s.eval_start_s},
            {"eval_end_s", s.eval_end_s},
            {"runner_wait_us", s.runner_wait_us},
            {"runner_map_us", s.runner_map_us},
            {"runner_library_us", s.runner_library_us},
            {"kept_verify_us", s.kept_verify_us},
            {"retired_wait_us", s.retired_wait_us},
            {"gpu_lock_wait_us", s.gpu_lock_wait_us},
            {"runner_start_us", s.runner_start_us},
            {"compile_host_us", s.compile_host_us},
            {"compile_device_us", s.compile_device_us}}}};
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
