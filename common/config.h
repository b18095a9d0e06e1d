// Every number that matters, with its documented default, in one place.
// Loaded from TOML ([compile], [sandbox], [eval]); unknown keys are errors.
#pragma once
#include <utility>
#include <cstdint>
#include <string>
#include <vector>

#include "common/eval_fields.h"

namespace leap {

struct CompileConfig {
  int jobs = 0;                       // parallel compiler processes; 0 = the cores this process may use
  double timeout_s = 60;              // per compile job, then SIGKILL
  std::string cxx = "g++";            // CPU backend compiler
  std::vector<std::string> cxx_flags = {"-std=c++17", "-O3", "-march=native"};
  std::string nvcc = "nvcc";          // CUDA backend compiler
  std::string cuda_arch = "sm_90";    // target of CUDA candidates
  std::vector<std::string> nvcc_flags = {"-std=c++17", "-O3"};
  bool nvrtc = true;                  // CUDA device code through NVRTC where the source allows
  std::string cache_dir;              // "" = $LEAP_CACHE_DIR or ~/.cache/leap/compile
  int max_diagnostic_lines = 40;      // compiler output kept as candidate feedback
  bool sandbox = true;                // compilers inside bubblewrap: the job folder, system and toolkit read-only, no network
  uint64_t memory_mb = 8192;          // address space of a compiler process
  // Scheduling niceness of the compilers (0-19): builds are throughput work; a judge, its runners
  // and their start (PyTorch's import) are on every verdict's path and go first on a busy machine.
  int nice = 10;
};

struct SandboxConfig {
  double deadline_s = 30;             // the candidate's wall time (load, calls) per evaluation: the judge kills the runner (timeout)
  uint64_t memory_mb = 4096;          // host memory of a candidate's runner (address space on CPU)
  bool seccomp = true;                // allow-list filter in every candidate runner
  bool namespaces = true;             // runners (and compilers) inside bubblewrap's namespaces
  int runner_spares = 0;              // pre-started runners per judge (one candidate each); 0: runner_spares()
  // KernelBench-format candidates' Python runners forked from one interpreter per judge that has
  // imported PyTorch once (false: each runner imports it, seconds of CPU per candidate)
  bool python_zygote = true;
  int evaluators = 1;                 // judge processes; on CUDA evaluator i uses GPU i % gpus
  int gpus = 0;                       // CUDA: GPUs the evaluators spread over; 0 = every GPU the process sees
  // CUDA_DEVICE_MAX_CONNECTIONS of a runner (0: the driver's default, 8). One queue: the context is made in
  // ~0.1 s instead of ~0.35 s, and a candidate's work is on one stream anyway (stream honesty).
  int cuda_connections = 1;
  int spares = 1;                     // pre-started replacement judges per evaluator
  int infra_retries = 2;              // further attempts after an infra_error (our fault)
};
// The runners a judge keeps started: [sandbox] runner_spares, else 2 on the CPU and 12 on CUDA (a
// CUDA runner takes ~0.5-1.2 s to start and a level-1 evaluation ~0.1 s), the GPU's 12 shared out
// among its judges where `judges` share `gpus` (4 each at least).
int runner_spares(const SandboxConfig& s, bool cuda, int judges = 1, int gpus = 1);

// [eval]: how a candidate is judged (common/eval_fields.h declares each field, its default, its
// range and what it means).
struct EvalConfig {
#define LEAP_EVAL_MEMBER(type, name, wire, value, range, meaning) type name = value;
  LEAP_EVAL_FIELDS(LEAP_EVAL_MEMBER)
#undef LEAP_EVAL_MEMBER
};
// The profiling step's limit; the evaluator's wait for a judge that profiles grows by as much.
inline constexpr double kProfileBudgetS = 60;

struct LearnerConfig {
  int group_size = 8;                 // G rollouts per task
  int max_turns = 3;                  // T
  // DCP (DCP's only defaults): a group is refined when its turn-1 failures n_fail (>= 1) lie in
  // [ceil(t_min_frac * G), floor(t_max_frac * G)] and not every rollout failed; fewer = easy,
  // more or all = hopeless. The default is the method's: groups with at least half their
  // rollouts failing at turn 1, the all-failed ("overly catastrophic") ones pruned too.
  double t_min_frac = 0.5;
  double t_max_frac = 1.0;
  int t_min = -1, t_max = -1;         // the same as counts (-1: from the fractions)
  bool refine_all_failed = false;     // true: a group in which every rollout failed is refined (if t_max allows)
  bool dcp = true;                    // false: refine every group with a failure
  std::string reward = "rank";        // rank | binary | kevin | trloo (per-turn returns, leave-one-out)
  // group: LEAP's rule, every turn's advantage from the group-wide reward. turn: a refinement turn
  // t >= 2 is compared only with the group's rollouts that reached turn t (rank: the tournament
  // within that cohort; binary: its mean); a cohort of one, with the step's other turn-t samples
  // (leave-one-out). Turn 1 keeps the group's reward. (trloo is per-turn by definition.)
  std::string advantage_baseline = "group";
  double gamma = 0.8;                 // rank: discount of a positive reward per earlier turn; trloo: of a later success
  double kevin_gamma = 0.4;           // kevin: discount of later turn scores
  bool speedup_tiebreak = false;      // rank: faster ranks higher among equal outcomes
  std::string advantage_norm = "none";  // none | group_std (divide by the group's reward std)
};

struct PolicyConfig {
  std::string kind = "schedule";      // schedule (LibTorch network over template knobs) | replay | lm
  std::string candidates;             // replay: folder or JSONL of candidate sources
  int hidden = 64;                    // schedule: hidden units
  double lr = 0.03;                   // Adam learning rate
  double clip = 0.2;                  // clipped policy-gradient ratio bound
  double entropy_coef = 0.01;         // entropy bonus
  int epochs = 2;                     // passes over a step's batch
  // lm: a causal language model writes the kernel as text (docs/lm.md); set lr for it (1e-5 for
  // a 0.5B model).
  std::string model;                  // a Hugging Face folder (config.json, safetensors, tokenizer.json)
  std::string prompt;                 // the task prompt's template file ("" = leap's, prompt/prompt.h)
  double temperature = 1.0;
  double top_p = 1.0;
  int max_new_tokens = 1024;
  int feedback_chars = 2000;          // of leap's feedback in the next turn's prompt
  int micro_batch = 4;                // sequences per forward/backward (gradients accumulate)
  double grad_clip = 1.0;             // gradient-norm bound
  bool checkpoint = false;            // activation checkpointing
  int generate_batch = 16;            // a worker's rollouts decoded together, at most this many at once
  int broadcast_bucket_mb = 64;       // the weight broadcast's bucket (named tensors packed up to this size)
  std::string device = "cpu";         // lm: where the model runs (cpu, cuda: the rank's own GPU, cuda:N)
  std::string dtype = "auto";         // lm: float32 | bfloat16 | float16 | auto (bfloat16 on cuda, float32 on cpu)
  double kl_coef = 0;                 // weight of the per-token KL to the initial weights (0: none kept)
  // lm: a stale sample's tokens ([run] max_staleness) are weighted by pi_current / pi_behaviour,
  // truncated at this (decoupled PPO: the clip is around the current weights, the weight corrects
  // for the older ones that sampled).
  double behaviour_weight_cap = 5.0;
};

struct RunConfig {
  std::string name = "run";           // runs/<name>/ unless --run-dir
  std::string backend = "cpu";        // cpu | cuda
  std::string suite = "builtin";      // suite folder or builtin
  std::vector<std::string> tasks;     // task names; empty = every task the policy can write
  int steps = 20;                     // RL steps
  int tasks_per_step = 4;             // B groups per step
  uint64_t seed = 1;                  // task sampling, policy initialisation and sampling
  int checkpoint_every = 5;           // steps between checkpoints (and at the last step)
  double worker_timeout_s = 300;      // a worker holding work and silent this long stops the run
  // Steps generated while the learner still trains earlier ones: a step's rollouts use weights at
  // most this many versions older than the ones it trains (0: strictly on-policy, sequential).
  int max_staleness = 0;
  std::string bind_address;           // "" = LEAP_BIND_ADDRESS, else the host's routable address
};

// `leap bench dcp`: the experiment around the runs (docs/benchmarks.md).
struct BenchConfig {
  double target = 0.75;  // held-out accuracy at turn T to reach, fixed before the runs
  double target_turn1 = 0.5;  // ... and at turn 1 (LEAP's 1.93x is to equal first-turn accuracy)
  int seeds = 3;         // repetitions of every variant (seeds run.seed, run.seed + 1, ...)
  int eval_every = 4;    // steps between held-out evaluations (and checkpoints)
  int held_out = 0;      // tasks held out of training; 0 = a quarter of them (at least 1)
  std::vector<std::string> held_out_tasks;  // these tasks held out instead (an experiment's chosen split)
  // Chains per held-out task: 1, greedy; more, sampled at the policy's temperature (a finer
  // accuracy: the share of tasks x chains solved; the same seeds at every checkpoint).
  int held_out_samples = 1;
};

// `leap serve`: the evaluation cluster as an HTTP reward service (docs/serve.md).
struct ServeConfig {
  std::string bind = "127.0.0.1";     // a non-loopback address requires a token
  int port = 8471;                    // 0: any free port (printed)
  std::string suite = "builtin";      // tasks served: a suite folder, 'builtin' or a bundled variant
  std::string backend = "cpu";        // cpu or cuda
  std::string token;                  // bearer token ("" = LEAP_SERVE_TOKEN, else none)
  int queue_limit = 1024;             // queued evaluations at most; beyond: 429 with Retry-After
  double max_body_mb = 4;             // request bodies over this: 413
  int threads = 512;                  // HTTP connections served at once (a thread each, started as needed)
  double read_deadline_s = 20;        // a connection's request (head and body) must arrive within this
  double max_wait_s = 600;            // longest a synchronous /v1/eval may wait
  int results_kept = 100000;          // finished evaluations kept for /v1/results (oldest dropped)
  bool cache = true;                  // repeated (task, source, settings) answered from the results
  double worker_timeout_s = 5;        // mpirun: a worker rank silent this long is lost, its work re-sent
  uint32_t max_trials = 20;           // per-request settings are clamped to these
  double max_timing_budget_ms = 5000;
};

// The experience graph (docs/memory.md): where it lives and how the next attempt's context is
// chosen from it (`leap agent`).
struct MemoryConfig {
  bool record = false;                // leap run: the learner records every turn's outcome as a case
  bool prompts = false;               // leap run, LM policy: every prompt carries the memory's context (needs record)
  std::string path;                   // "" = the run's own (RUN_DIR/memory.db, OUT/memory.db)
  std::string context = "active";     // active | passive | previous | none
  int budget_tokens = 2048;           // context tokens at most (about 4 bytes a token)
  int hot_cases = 2;                  // best cases in full source, beside the previous attempt
  int warm_cases = 8;                 // one-line summaries
  int cold_lessons = 8;               // failure patterns and their fixes
  // Each tier's own cap within budget_tokens (0: only the total): hot, warm, cold.
  int hot_tokens = 0, warm_tokens = 0, cold_tokens = 0;
  bool notes = true;                  // the target's notes (prompt/notes/) in the cold tier
  int max_source_chars = 6000;        // a longer source is cut (and says so)
  double improvement = 1.05;          // step ratio labels: >= improvement; [1, improvement) marginal;
  double slight_regression = 0.85;    // [slight_regression, 1) slight regression; below: regression
  double rank_gamma = 0.7;            // subtree value: 0.5 r + 0.5 gamma sum(successors)
  double confidence_k = 2;            // confidence n / (n + k), n = evaluations of the source
};

struct LeapConfig {
  CompileConfig compile;
  SandboxConfig sandbox;
  EvalConfig eval;
  LearnerConfig learner;
  PolicyConfig policy;
  RunConfig run;
  BenchConfig bench;
  ServeConfig serve;
  MemoryConfig memory;
};

// DCP's failure-count bounds (t_min, t_max) for the group size: the counts if given, else
// ceil(t_min_frac * G) and floor(t_max_frac * G).
std::pair<int, int> dcp_counts(const LearnerConfig& l);

// The memory's context modes (MemoryConfig::context, `leap agent --context`), as users write them.
inline constexpr const char* kContextModes = "active, passive, previous or none";
bool is_context_mode(const std::string& mode);

// Parses a TOML config; throws LeapError naming the file, line and key on any error.
LeapConfig load_config(const std::string& path);
// Same, from text (for tests); `origin` names the source in messages.
LeapConfig parse_config(const std::string& text, const std::string& origin);

}  // namespace leap
