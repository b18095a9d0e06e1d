// The outcome of evaluating one candidate: one vocabulary everywhere (status names of
// ARCHITECTURE.md), JSON records for results files, and the summary metrics of `leap eval`.
// In common/ so that the learner and policies read outcomes without depending on the worker.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/backend.h"

namespace leap {

enum class Status { ok, compile_error, runtime_error, timeout, wrong_answer, cheat_detected, infra_error };

std::string to_string(Status s);
std::optional<Status> status_from(const std::string& s);

// The judge's check that decided a verdict (with cheat_detected, and the few that qualify another
// status: a timeout that is `too_slow`, a runtime_error that is `resource_exhaustion`); `none`
// where the status says it all. Spelled in records as its name ("" for none).
enum class Check {
  none,
  too_slow,              // timeout: correct so far, but over its call limit or under the task's min_speedup
  resource_exhaustion,   // runtime_error: the judge failed only while the candidate's runner was alive
  forbidden_import,      // the library imports what no kernel may (processes, files, network, libraries)
  forged_reply,          // the runner answered out of protocol
  input_mutation,        // an input was written
  output_reuse,          // outputs of an earlier call returned again
  partial_write,         // part of an output was not written
  skipped_work,          // a call wrote nothing where earlier calls did
  stream_escape,         // GPU work outside the evaluator's stream
  threads_left_running,  // a thread of the candidate's ran outside its calls
  timed_call_wrong,      // a timed call, verified at random, was wrong
  timing_forged,         // the runner's timing disagrees with the kernel's account of its CPU time
  no_custom_kernel,      // a KernelBench-format answer whose call ran none of its own kernels
  vendor_library,        // a KernelBench-format answer whose call ran a PyTorch operator backed by a vendor library
};
constexpr Check kLastCheck = Check::vendor_library;

std::string to_string(Check c);
std::optional<Check> check_from(const std::string& s);  // "" is none
// "ok", "timeout(too_slow)": a verdict in a table's one column.
std::string verdict_text(Status s, Check c);

// A verdict as one part of the judge reaches it (the call budget, the escape check), before the
// judge records it in the evaluation's outcome.
struct Verdict {
  Status status = Status::ok;
  Check check = Check::none;
  std::string feedback;
};

struct TimingStats {
  double median_us = 0, mean_us = 0, stddev_us = 0, p10_us = 0, p90_us = 0, rse = 0, total_us = 0;
  uint32_t samples = 0;
};

// The outcome, declared once: each plain field's type, name, name on the wire (proto/leap.capnp)
// and default. The structs' members, their wire form both ways (common/outcome_proto.cpp) and
// their JSON (to_json) follow from these tables; the enums, the nested timings and the derived
// `correct_trials` are written out beside them. A new field is its line here and in the schema.
#define LEAP_TRIAL_FIELDS(X)                                                             \
  X(uint32_t, index, Index, 0)                                                           \
  X(bool, passed, Passed, false)                                                         \
  X(double, max_abs_error, MaxAbsError, 0)                                               \
  X(double, max_rel_error, MaxRelError, 0)                                               \
  X(int64_t, first_bad_index, FirstBadIndex, -1)                                         \
  X(int64_t, mismatches, Mismatches, 0)

// eval_us: the evaluation as the worker sees it (request to reply); timing_us: the candidate's
// timed calls with their warm-up; total_us: from the start of the run to this outcome.
#define LEAP_STAGE_FIELDS(X)                                                                                    \
  X(double, queue_wait_us, QueueWaitUs, 0)                                                                      \
  X(double, compile_us, CompileUs, 0)                                                                           \
  X(double, load_us, LoadUs, 0)                                                                                 \
  X(double, correctness_us, CorrectnessUs, 0)                                                                   \
  X(double, timing_us, TimingUs, 0)                                                                             \
  X(double, eval_us, EvalUs, 0)                                                                                 \
  X(double, total_us, TotalUs, 0)                                                                               \
  X(double, candidate_calls_us, CandidateCallsUs, 0) /* inside the candidate's untimed (correctness) calls */   \
  /* Wall-clock spans in Unix seconds (0 = stage not reached), for per-worker timelines. */                     \
  X(double, compile_start_s, CompileStartS, 0)                                                                  \
  X(double, compile_end_s, CompileEndS, 0)                                                                      \
  X(double, eval_start_s, EvalStartS, 0)                                                                        \
  X(double, eval_end_s, EvalEndS, 0)                                                                            \
  X(double, runner_wait_us, RunnerWaitUs, 0)   /* waiting for a candidate runner to start (0: a spare ready) */ \
  X(double, runner_start_us, RunnerStartUs, 0) /* that runner's start as it reports it (process to ready) */    \
  /* The load as the runner reports it (untrusted diagnostics), and the kept calls' verification. */            \
  X(double, runner_map_us, RunnerMapUs, 0)                                                                      \
  X(double, runner_library_us, RunnerLibraryUs, 0)                                                              \
  X(double, kept_verify_us, KeptVerifyUs, 0)                                                                    \
  X(double, retired_wait_us, RetiredWaitUs, 0)   /* waiting for the previous candidate's runner to be gone */   \
  X(double, gpu_lock_wait_us, GpuLockWaitUs, 0) /* waiting for the GPU's timing lock (judges sharing a GPU) */  \
  /* The NVRTC split's passes inside compile_us (summed over an answer's extensions; 0: no split). */          \
  X(double, compile_host_us, CompileHostUs, 0)                                                                  \
  X(double, compile_device_us, CompileDeviceUs, 0)

// A kernel launch as the profiler measured it (percentages of the device's peak).
#define LEAP_KERNEL_FIELDS(X)                                                     \
  X(std::string, kernel, Kernel, {})                                              \
  X(double, duration_us, DurationUs, 0)                                           \
  X(double, occupancy_pct, OccupancyPct, 0)                                       \
  X(double, dram_pct, DramPct, 0)                                                 \
  X(double, memory_pct, MemoryPct, 0)                                             \
  X(double, sm_pct, SmPct, 0)                                                     \
  X(uint32_t, registers, Registers, 0)     /* per thread */                       \
  X(uint64_t, shared_bytes, SharedBytes, 0) /* per block, static and dynamic */   \
  X(std::string, block, Block, {})                                                \
  X(std::string, grid, Grid, {})

// EvalOutcome's plain fields (the record's; recycle_evaluator, leap's own signal, is not in it).
#define LEAP_OUTCOME_FIELDS(X)                                                                                     \
  X(uint64_t, id, Id, 0)                                                                                           \
  X(std::string, task, Task, {})                                                                                   \
  X(std::string, candidate, Candidate, {})                                                                         \
  X(std::string, feedback, Feedback, {}) /* diagnostics, mismatch report, crash context */                         \
  X(double, speedup, Speedup, 0)                                                                                   \
  X(bool, speedup_flagged, SpeedupFlagged, false)                                                                  \
  X(bool, cache_hit, CacheHit, false)                                                                              \
  /* c++, nvcc or nvrtc (python+...: a KernelBench-format answer's extensions, " +torch-all" where its host code \
     needed all of <torch/extension.h>); empty on a cache hit */                                                   \
  X(std::string, compiler, Compiler, {})                                                                           \
  X(std::string, nvrtc_fallback, NvrtcFallback, {}) /* why the farm built CUDA with nvcc, not NVRTC ("": it did not) */ \
  X(uint64_t, seed, Seed, 0)                      /* the evaluation's input seed */                                \
  X(uint32_t, calls, Calls, 0)                    /* candidate calls, each on fresh inputs */                      \
  X(uint32_t, verified_calls, VerifiedCalls, 0)   /* of those, compared with the reference */                      \
  /* Correctness trials before timing: [eval] trials, or fewer for a candidate clearly slower than its             \
     reference, whose verified timed calls then carried the rest of the correctness check. */                      \
  X(uint32_t, trial_calls, TrialCalls, 0)                                                                          \
  /* Untimed warm-up calls before the timed ones: none for a clearly slow candidate whose trial calls were each   \
     longer than the warm-up's time (they warmed it). */                                                           \
  X(uint32_t, warmup_calls, WarmupCalls, 0)                                                                        \
  /* [eval] profile: the longest kernel's bottleneck, the profiling step's wall time, or why no profile came. */   \
  X(std::string, bottleneck, Bottleneck, {})                                                                       \
  X(double, profile_us, ProfileUs, 0)                                                                              \
  X(std::string, profile_error, ProfileError, {})                                                                  \
  X(double, wall_excess_us, WallExcessUs, 0) /* judge wall - runner timing - calibrated overhead (median) */

#define LEAP_OUTCOME_MEMBER(type, name, wire, value) type name = value;

struct TrialResult {
  LEAP_TRIAL_FIELDS(LEAP_OUTCOME_MEMBER)
};

struct StageTimes {
  LEAP_STAGE_FIELDS(LEAP_OUTCOME_MEMBER)
};

struct KernelProfile {
  LEAP_KERNEL_FIELDS(LEAP_OUTCOME_MEMBER)
};

struct EvalOutcome {
  LEAP_OUTCOME_FIELDS(LEAP_OUTCOME_MEMBER)
  Backend backend = Backend::cpu;
  Status status = Status::infra_error;
  Check check = Check::none;  // the check that decided it (with cheat_detected always)
  std::vector<TrialResult> trials;
  TimingStats candidate_timing, reference_timing;
  StageTimes stages;
  // [eval] profile: one call's kernels as Nsight Compute measured them.
  std::vector<KernelProfile> kernels;
  bool recycle_evaluator = false;  // the evaluator process must not be reused (leap's own signal)

  uint32_t correct_trials() const;
};

nlohmann::json to_json(const EvalOutcome& o);

// The outcome of a candidate that was never judged (it did not compile, leap failed, ...).
EvalOutcome failed_outcome(std::string task, std::string candidate, Backend backend, Status status,
                           std::string feedback);

struct EvalSummary {
  size_t total = 0;
  size_t judged = 0;        // total less infra_error: leap's failures are no candidate's verdict
  size_t infra_errors = 0;
  std::map<Status, size_t> by_status;
  double correct_rate = 0;  // over the judged
  // KernelBench's fast_p: correct and speedup > p, over the judged (fast_0: correct at any speed).
  double fast_0 = 0, fast_1 = 0, fast_1_5 = 0, fast_2 = 0;
  double geomean_speedup = 0;            // over correct candidates; 0 when none
};

double fast_p(const std::vector<EvalOutcome>& outcomes, double p);
EvalSummary summarize(const std::vector<EvalOutcome>& outcomes);

}  // namespace leap
