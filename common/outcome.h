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

struct TrialResult {
  uint32_t index = 0;
  bool passed = false;
  double max_abs_error = 0, max_rel_error = 0;
  int64_t first_bad_index = -1, mismatches = 0;
};

// eval_us: the evaluation as the worker sees it (request to reply); timing_us: the candidate's
// timed calls with their warm-up; total_us: from the start of the run to this outcome.
struct StageTimes {
  double queue_wait_us = 0, compile_us = 0, load_us = 0, correctness_us = 0, timing_us = 0, eval_us = 0, total_us = 0;
  double candidate_calls_us = 0;  // inside the candidate's untimed (correctness) calls
  // Wall-clock spans in Unix seconds (0 = stage not reached), for per-worker timelines.
  double compile_start_s = 0, compile_end_s = 0, eval_start_s = 0, eval_end_s = 0;
  double runner_wait_us = 0;  // waiting for a candidate runner to start (0: a spare was ready)
  double runner_start_us = 0;  // that runner's start as it reports it (process start to ready)
  // The load as the runner reports it (untrusted diagnostics), and the kept calls' verification.
  double runner_map_us = 0, runner_library_us = 0, kept_verify_us = 0;
  double retired_wait_us = 0;  // waiting for the previous candidate's runner to be gone
  double gpu_lock_wait_us = 0;  // waiting for the GPU's timing lock (judges sharing a GPU)
  // The NVRTC split's passes inside compile_us (summed over an answer's extensions; 0: no split).
  double compile_host_us = 0, compile_device_us = 0;
};

// A kernel launch as the profiler measured it (percentages of the device's peak).
struct KernelProfile {
  std::string kernel;
  double duration_us = 0, occupancy_pct = 0, dram_pct = 0, memory_pct = 0, sm_pct = 0;
  uint32_t registers = 0;      // per thread
  uint64_t shared_bytes = 0;   // per block, static and dynamic
  std::string block, grid;
};

struct EvalOutcome {
  uint64_t id = 0;
  std::string task, candidate;
  Backend backend = Backend::cpu;
  Status status = Status::infra_error;
  Check check = Check::none;  // the check that decided it (with cheat_detected always)
  std::string feedback;  // diagnostics, mismatch report, crash context
  std::vector<TrialResult> trials;
  TimingStats candidate_timing, reference_timing;
  double speedup = 0;
  bool speedup_flagged = false;
  bool cache_hit = false;
  // c++, nvcc or nvrtc (python+...: a KernelBench-format answer's extensions, " +torch-all" where its
  // host code needed all of <torch/extension.h>); empty on a cache hit
  std::string compiler;
  std::string nvrtc_fallback;  // why the farm built CUDA code with nvcc instead of NVRTC ("" if it did not)
  StageTimes stages;
  bool recycle_evaluator = false;
  uint64_t seed = 0;             // the evaluation's input seed
  uint32_t calls = 0;            // candidate calls, each on fresh inputs
  uint32_t verified_calls = 0;   // of those, compared with the reference
  // Correctness trials before timing: [eval] trials, or fewer for a candidate clearly slower than
  // its reference, whose verified timed calls then carried the rest of the correctness check.
  uint32_t trial_calls = 0;
  // Untimed warm-up calls before the timed ones: none for a clearly slow candidate whose trial
  // calls were each longer than the warm-up's time (they warmed it).
  uint32_t warmup_calls = 0;
  // [eval] profile: one call's kernels as Nsight Compute measured them, the longest one's
  // bottleneck, the profiling step's wall time, or why no profile came back.
  std::vector<KernelProfile> kernels;
  std::string bottleneck;
  double profile_us = 0;
  std::string profile_error;
  double wall_excess_us = 0;     // judge wall - runner timing - calibrated overhead (median)

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
