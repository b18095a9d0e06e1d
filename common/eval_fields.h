// [eval], declared once. Each field's type, name, its name on the wire (proto/leap.capnp's
// EvalSettings), default, the values it may take and what it means: EvalConfig's members
// (common/config.h), its TOML parsing and checks (common/config.cpp), its wire form both ways
// (common/outcome_proto.cpp), its JSON and the service's per-request checks (serve/http_json.cpp)
// follow from this table. A new field is its line here and its line in the schema.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace leap {

// The values a numeric field may take: from `lo` (excluded where `lo_open`) to `hi`, and 0 besides
// where `zero_off` (0 turns the rule off).
struct FieldRange {
  double lo = 0, hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, zero_off = false;
  bool allows(double v) const;
  // "must be > 0", "must be 0 (off) or >= 1", "must be in 0..1000"; `integral`: a bounded range
  // above lo reads as the integers it holds ("in 1..64", not "in (0, 64]").
  std::string text(bool integral = false) const;
};
constexpr FieldRange at_least(double lo) { return {lo, std::numeric_limits<double>::infinity(), false, false}; }
constexpr FieldRange above(double lo) { return {lo, std::numeric_limits<double>::infinity(), true, false}; }
constexpr FieldRange off_or_at_least(double lo) { return {lo, std::numeric_limits<double>::infinity(), false, true}; }
constexpr FieldRange between(double lo, double hi) { return {lo, hi, false, false}; }
constexpr FieldRange any_bool() { return {}; }

// X(type, name, WireName, default, range, meaning)
#define LEAP_EVAL_FIELDS(X)                                                                                           \
  X(uint32_t, trials, Trials, 5, above(0), "correctness trials, fresh random inputs each")                            \
  X(uint64_t, seed, Seed, 0, at_least(0), "input seed of every evaluation; 0: a fresh random one each (recorded)")   \
  X(uint32_t, warmup_calls, WarmupCalls, 3, at_least(0), "warm-up calls at least ...")                                \
  X(double, warmup_ms, WarmupMs, 25, at_least(0), "... and at least this long (GPU clocks settle)")                   \
  X(uint32_t, min_samples, MinSamples, 10, above(0), "timed calls at least ...")                                      \
  X(uint32_t, over_budget_samples, OverBudgetSamples, 3, at_least(0),                                                 \
    "... unless the timed calls alone have spent timing_budget_ms: then this many (0: min_samples regardless); a "    \
    "candidate that slow is not ranked differently by more samples of it")                                           \
  X(double, precise_stop_ms, PreciseStopMs, 250, at_least(0),                                                         \
    "... or once they alone have spent this and their median is already precise (rse_target): a 150 ms GEMM call "   \
    "needs no ten samples for a 1 % median (0: off)")                                                                 \
  X(uint32_t, max_samples, MaxSamples, 5000, at_least(0), "timed calls at most (at least min_samples)")               \
  X(double, timing_budget_ms, TimingBudgetMs, 1000, above(0), "time spent in timed calls at most, per candidate")     \
  X(double, rse_target, RseTarget, 0.01, above(0), "stop timing once the median's relative standard error is below") \
  X(double, slow_stop_ratio, SlowStopRatio, 2, off_or_at_least(1),                                                    \
    "on the GPU, stop timing once 5 timed calls show the candidate at least this many times slower than its "        \
    "reference (two standard errors of margin, median within 5 %); the same ratio cuts the correctness trials to 2 " \
    "for a candidate whose second trial took 1 ms or more and this many times its reference (0: off)")               \
  X(double, speedup_bound, SpeedupBound, 10, above(0), "above this speedup: further calls verified, and flagged")    \
  X(uint32_t, verified_timed_calls, VerifiedTimedCalls, 8, between(0, 1000),                                          \
    "timed calls compared with the reference: a uniform random sample (and the last)")                               \
  X(double, timing_slack, TimingSlack, 0.10, at_least(0),                                                             \
    "the judge's observation may exceed the runner's timing + overhead by this fraction (CPU: at least 1) ...")      \
  X(double, timing_slack_us, TimingSlackUs, 0, at_least(0),                                                           \
    "... or this much, whichever is larger; 0: 20 us on the CPU, 50 us on CUDA")                                     \
  X(uint32_t, max_feedback_bytes, MaxFeedbackBytes, 8192, at_least(256),                                              \
    "feedback per record, cut on a UTF-8 character boundary")                                                         \
  X(double, call_limit_ratio, CallLimitRatio, 100, off_or_at_least(1),                                                \
    "a call's limit is this x the reference's median, never under call_limit_floor_ms; a call 10 x over it is "     \
    "stopped, and so is the evaluation once most calls after the first (2 at least) were over it (0: off, only "     \
    "[sandbox] deadline_s)")                                                                                          \
  X(double, call_limit_floor_ms, CallLimitFloorMs, 50, at_least(0), "the call limit's floor")                        \
  X(bool, require_custom_kernel, RequireCustomKernel, true, any_bool(),                                               \
    "KernelBench-format answers: each correctness call runs a kernel of the answer's own (load_inline or Triton) "  \
    "and no PyTorch operator backed by a vendor library, else cheat_detected(no_custom_kernel | vendor_library)")    \
  X(bool, profile, Profile, false, any_bool(),                                                                        \
    "after an ok verdict on the GPU, the candidate's kernels profiled by Nsight Compute into the record and the "    \
    "feedback; never changes the verdict or the timing")

struct EvalConfig;

// Sets field `name` of `e` from a JSON value of the right type within the field's range and at
// most `cap`; else the reason ("must be an integer in 1..64"). Unknown names are refused too.
std::optional<std::string> set_eval_field(EvalConfig& e, const std::string& name, const nlohmann::json& v,
                                          double cap = std::numeric_limits<double>::infinity());

// Every field, by name.
void to_json(nlohmann::json& j, const EvalConfig& e);

}  // namespace leap
