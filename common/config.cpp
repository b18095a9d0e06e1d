#include "common/config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "common/error.h"
#include "common/toml_fields.h"

namespace leap {
namespace {

template <typename T>
void set_if(std::optional<T> v, T& out) {
  if (v) out = *v;
}

// Counts and sizes: negative values must not wrap into huge unsigned ones; `positive`: 0 is
// refused too.
template <typename T>
void set_count(const TomlFields& f, const std::string& key, T& out, bool positive = false) {
  if (auto v = f.opt_integer(key)) {
    if (*v < (positive ? 1 : 0)) f.fail(key, positive ? "must be > 0" : "must be >= 0");
    out = static_cast<T>(*v);
  }
}

void positive(const TomlFields& f, const std::string& key, double v) {
  if (f.has(key) && !(v > 0)) f.fail(key, "must be > 0");
}

void load_compile(const TomlFields& f, CompileConfig& c) {
  f.only({"jobs", "timeout_s", "cxx", "cxx_flags", "nvcc", "cuda_arch", "nvcc_flags", "nvrtc",
          "cache_dir", "max_diagnostic_lines", "sandbox", "memory_mb", "nice"});
  set_count(f, "jobs", c.jobs);
  if (c.jobs < 0) f.fail("jobs", "must be >= 0");
  set_if(f.opt_num("timeout_s"), c.timeout_s);
  positive(f, "timeout_s", c.timeout_s);
  set_if(f.opt_str("cxx"), c.cxx);
  set_if(f.opt_str_list("cxx_flags"), c.cxx_flags);
  set_if(f.opt_str("nvcc"), c.nvcc);
  set_if(f.opt_str("cuda_arch"), c.cuda_arch);
  set_if(f.opt_str_list("nvcc_flags"), c.nvcc_flags);
  set_if(f.opt_bool("nvrtc"), c.nvrtc);
  set_if(f.opt_str("cache_dir"), c.cache_dir);
  set_count(f, "max_diagnostic_lines", c.max_diagnostic_lines);
  set_if(f.opt_bool("sandbox"), c.sandbox);
  set_count(f, "memory_mb", c.memory_mb, true);
  set_count(f, "nice", c.nice);
  if (c.nice < 0 || c.nice > 19) f.fail("nice", "must be 0-19 (compilers never run before the judge)");
}

void load_sandbox(const TomlFields& f, SandboxConfig& s) {
  f.only({"deadline_s", "memory_mb", "seccomp", "namespaces", "runner_spares", "python_zygote", "evaluators", "gpus",
          "cuda_connections", "spares", "infra_retries"});
  set_count(f, "infra_retries", s.infra_retries);
  set_if(f.opt_num("deadline_s"), s.deadline_s);
  positive(f, "deadline_s", s.deadline_s);
  set_count(f, "memory_mb", s.memory_mb, true);
  set_if(f.opt_bool("seccomp"), s.seccomp);
  set_if(f.opt_bool("namespaces"), s.namespaces);
  set_if(f.opt_bool("python_zygote"), s.python_zygote);
  set_count(f, "runner_spares", s.runner_spares);
  if (s.runner_spares > 64) f.fail("runner_spares", "must be <= 64");
  set_count(f, "evaluators", s.evaluators, true);
  set_count(f, "gpus", s.gpus);
  if (s.gpus < 0) f.fail("gpus", "must be >= 0");
  set_count(f, "cuda_connections", s.cuda_connections);
  if (s.cuda_connections < 0 || s.cuda_connections > 32) f.fail("cuda_connections", "must be in 0..32");
  set_count(f, "spares", s.spares);
  if (s.spares < 0) f.fail("spares", "must be >= 0");
}

// One [eval] field from TOML within its declared range (common/eval_fields.h).
void load_field(const TomlFields& f, const std::string& key, bool& out, const FieldRange&) {
  set_if(f.opt_bool(key), out);
}
template <typename T>
void load_field(const TomlFields& f, const std::string& key, T& out, const FieldRange& r) {
  if constexpr (std::is_integral_v<T>) {
    const auto i = f.opt_integer(key);
    if (!i) return;
    if (!r.allows(static_cast<double>(*i))) f.fail(key, r.text());
    // Assigned from the integer itself (a seed past 2^53 has no exact double), never wrapped.
    if (static_cast<uint64_t>(*i) > std::numeric_limits<T>::max())
      f.fail(key, "must be at most " + std::to_string(std::numeric_limits<T>::max()));
    out = static_cast<T>(*i);
  } else {
    const auto v = f.opt_num(key);
    if (!v) return;
    if (!r.allows(*v)) f.fail(key, r.text());
    out = static_cast<T>(*v);
  }
}

void load_eval(const TomlFields& f, EvalConfig& e) {
#define LEAP_EVAL_KEY(type, name, wire, value, range, meaning) #name,
  f.only({LEAP_EVAL_FIELDS(LEAP_EVAL_KEY)});
#undef LEAP_EVAL_KEY
#define LEAP_EVAL_LOAD(type, name, wire, value, range, meaning) load_field(f, #name, e.name, range);
  LEAP_EVAL_FIELDS(LEAP_EVAL_LOAD)
#undef LEAP_EVAL_LOAD
  if (e.max_samples < e.min_samples) f.fail("max_samples", "must be >= min_samples");
}

}  // namespace

int runner_spares(const SandboxConfig& s, bool cuda, int judges, int gpus) {
  if (s.runner_spares > 0) return s.runner_spares;
  if (!cuda) return 2;
  return judges > gpus ? std::max(4, 12 * gpus / judges) : 12;
}

bool is_context_mode(const std::string& mode) {
  return mode == "active" || mode == "passive" || mode == "previous" || mode == "none";
}

std::pair<int, int> dcp_counts(const LearnerConfig& l) {
  const double g = l.group_size;
  int lo = l.t_min >= 0 ? l.t_min : static_cast<int>(std::ceil(l.t_min_frac * g - 1e-9));
  int hi = l.t_max >= 0 ? l.t_max : static_cast<int>(std::floor(l.t_max_frac * g + 1e-9));
  return {lo, hi};
}

namespace {

void load_learner(const TomlFields& f, LearnerConfig& l) {
  f.only({"group_size", "max_turns", "t_min", "t_max", "t_min_frac", "t_max_frac", "refine_all_failed", "dcp", "reward",
          "advantage_baseline", "gamma", "kevin_gamma", "speedup_tiebreak", "advantage_norm"});
  set_count(f, "group_size", l.group_size);
  if (l.group_size < 2) f.fail("group_size", "must be >= 2");
  set_count(f, "max_turns", l.max_turns);
  if (l.max_turns < 1) f.fail("max_turns", "must be >= 1");
  if (f.opt_num("t_min") && f.opt_num("t_min_frac")) f.fail("t_min_frac", "give t_min or t_min_frac, not both");
  if (f.opt_num("t_max") && f.opt_num("t_max_frac")) f.fail("t_max_frac", "give t_max or t_max_frac, not both");
  set_count(f, "t_min", l.t_min);
  set_count(f, "t_max", l.t_max);
  set_if(f.opt_num("t_min_frac"), l.t_min_frac);
  set_if(f.opt_num("t_max_frac"), l.t_max_frac);
  for (auto [key, v] : {std::pair{"t_min_frac", l.t_min_frac}, std::pair{"t_max_frac", l.t_max_frac}})
    if (!(v >= 0 && v <= 1)) f.fail(key, "must be in [0, 1] (a fraction of group_size)");
  set_if(f.opt_bool("refine_all_failed"), l.refine_all_failed);
  auto [lo, hi] = dcp_counts(l);
  // Without refine_all_failed, G failures is hopeless whatever t_max says.
  const int top = l.refine_all_failed ? hi : std::min(hi, l.group_size - 1);
  if (top < lo || hi > l.group_size || lo < 0)
    f.fail(f.opt_num("t_max") ? "t_max" : "t_max_frac",
           "the DCP range holds no failure count for group_size " + std::to_string(l.group_size) + " (t_min " +
               std::to_string(lo) + ", t_max " + std::to_string(hi) +
               (l.refine_all_failed ? "" : "; all-failed groups are hopeless unless refine_all_failed = true") + ")");
  set_if(f.opt_bool("dcp"), l.dcp);
  set_if(f.opt_str("reward"), l.reward);
  if (l.reward != "rank" && l.reward != "binary" && l.reward != "kevin" && l.reward != "trloo")
    f.fail("reward", "unknown reward '" + l.reward + "' (rank, binary, kevin, trloo)");
  set_if(f.opt_str("advantage_baseline"), l.advantage_baseline);
  if (l.advantage_baseline != "group" && l.advantage_baseline != "turn")
    f.fail("advantage_baseline", "unknown baseline '" + l.advantage_baseline + "' (group, turn)");
  if (l.advantage_baseline == "turn" && l.reward == "kevin")
    f.fail("advantage_baseline", "a per-turn baseline is defined for the rank, binary and trloo rewards, not kevin");
  set_if(f.opt_num("gamma"), l.gamma);
  if (!(l.gamma > 0 && l.gamma <= 1)) f.fail("gamma", "must be in (0, 1]");
  set_if(f.opt_num("kevin_gamma"), l.kevin_gamma);
  if (!(l.kevin_gamma >= 0 && l.kevin_gamma <= 1)) f.fail("kevin_gamma", "must be in [0, 1]");
  set_if(f.opt_bool("speedup_tiebreak"), l.speedup_tiebreak);
  set_if(f.opt_str("advantage_norm"), l.advantage_norm);
  if (l.advantage_norm != "none" && l.advantage_norm != "group_std")
    f.fail("advantage_norm", "unknown normalisation '" + l.advantage_norm + "' (none, group_std)");
}

void load_bench(const TomlFields& f, BenchConfig& b) {
  f.only({"target", "target_turn1", "seeds", "eval_every", "held_out", "held_out_tasks", "held_out_samples"});
  set_count(f, "held_out_samples", b.held_out_samples);
  if (b.held_out_samples < 1 || b.held_out_samples > 1000) f.fail("held_out_samples", "must be in 1..1000");
  set_if(f.opt_num("target"), b.target);
  if (!(b.target > 0 && b.target <= 1)) f.fail("target", "must be in (0, 1] (a held-out accuracy)");
  set_if(f.opt_num("target_turn1"), b.target_turn1);
  if (!(b.target_turn1 > 0 && b.target_turn1 <= 1)) f.fail("target_turn1", "must be in (0, 1] (a held-out accuracy)");
  set_count(f, "seeds", b.seeds);
  if (b.seeds < 1) f.fail("seeds", "must be >= 1");
  set_count(f, "eval_every", b.eval_every);
  if (b.eval_every < 1) f.fail("eval_every", "must be >= 1");
  set_count(f, "held_out", b.held_out);
  set_if(f.opt_str_list("held_out_tasks"), b.held_out_tasks);
}

void load_serve(const TomlFields& f, ServeConfig& s) {
  f.only({"bind", "port", "suite", "backend", "token", "queue_limit", "max_body_mb", "threads", "max_wait_s",
          "results_kept", "cache", "max_trials", "max_timing_budget_ms", "worker_timeout_s", "read_deadline_s"});
  set_if(f.opt_num("read_deadline_s"), s.read_deadline_s);
  positive(f, "read_deadline_s", s.read_deadline_s);
  set_if(f.opt_num("worker_timeout_s"), s.worker_timeout_s);
  positive(f, "worker_timeout_s", s.worker_timeout_s);
  set_if(f.opt_str("bind"), s.bind);
  set_count(f, "port", s.port);
  if (s.port > 65535) f.fail("port", "must be in 0..65535 (0: any free port)");
  set_if(f.opt_str("suite"), s.suite);
  set_if(f.opt_str("backend"), s.backend);
  if (s.backend != "cpu" && s.backend != "cuda") f.fail("backend", "unknown backend '" + s.backend + "' (cpu, cuda)");
  set_if(f.opt_str("token"), s.token);
  set_count(f, "queue_limit", s.queue_limit, true);
  set_if(f.opt_num("max_body_mb"), s.max_body_mb);
  positive(f, "max_body_mb", s.max_body_mb);
  set_count(f, "threads", s.threads);
  if (s.threads < 4) f.fail("threads", "must be >= 4");
  set_if(f.opt_num("max_wait_s"), s.max_wait_s);
  positive(f, "max_wait_s", s.max_wait_s);
  set_count(f, "results_kept", s.results_kept, true);
  set_if(f.opt_bool("cache"), s.cache);
  set_count(f, "max_trials", s.max_trials, true);
  set_if(f.opt_num("max_timing_budget_ms"), s.max_timing_budget_ms);
  positive(f, "max_timing_budget_ms", s.max_timing_budget_ms);
}

void load_memory(const TomlFields& f, MemoryConfig& m) {
  f.only({"record", "prompts", "path", "context", "budget_tokens", "hot_cases", "warm_cases", "cold_lessons", "max_source_chars",
          "improvement", "slight_regression", "rank_gamma", "confidence_k", "hot_tokens", "warm_tokens", "cold_tokens",
          "notes"});
  set_if(f.opt_bool("record"), m.record);
  set_if(f.opt_bool("prompts"), m.prompts);
  if (m.prompts && !m.record) f.fail("prompts", "needs record = true: the learner's memory is what the prompts read");
  set_if(f.opt_str("path"), m.path);
  set_if(f.opt_str("context"), m.context);
  if (!is_context_mode(m.context))
    f.fail("context", "unknown context '" + m.context + "' (" + kContextModes + ")");
  set_count(f, "budget_tokens", m.budget_tokens);
  set_count(f, "hot_cases", m.hot_cases);
  set_count(f, "warm_cases", m.warm_cases);
  set_count(f, "cold_lessons", m.cold_lessons);
  set_count(f, "hot_tokens", m.hot_tokens);
  set_count(f, "warm_tokens", m.warm_tokens);
  set_count(f, "cold_tokens", m.cold_tokens);
  set_if(f.opt_bool("notes"), m.notes);
  set_count(f, "max_source_chars", m.max_source_chars, true);
  set_if(f.opt_num("improvement"), m.improvement);
  if (m.improvement < 1) f.fail("improvement", "must be >= 1 (a step ratio)");
  set_if(f.opt_num("slight_regression"), m.slight_regression);
  if (m.slight_regression <= 0 || m.slight_regression > 1) f.fail("slight_regression", "must be in (0, 1]");
  set_if(f.opt_num("rank_gamma"), m.rank_gamma);
  if (m.rank_gamma < 0 || m.rank_gamma > 1) f.fail("rank_gamma", "must be in [0, 1]");
  set_if(f.opt_num("confidence_k"), m.confidence_k);
  if (m.confidence_k < 0) f.fail("confidence_k", "must be >= 0");
}

void load_policy(const TomlFields& f, PolicyConfig& p) {
  f.only({"kind", "candidates", "hidden", "lr", "clip", "entropy_coef", "epochs", "model", "temperature", "top_p",
          "max_new_tokens", "feedback_chars", "micro_batch", "grad_clip", "checkpoint", "generate_batch",
          "kl_coef", "prompt", "broadcast_bucket_mb", "device", "dtype", "behaviour_weight_cap"});
  set_if(f.opt_str("kind"), p.kind);
  if (p.kind != "schedule" && p.kind != "replay" && p.kind != "lm")
    f.fail("kind", "unknown policy '" + p.kind + "' (schedule, replay, lm)");
  set_if(f.opt_str("model"), p.model);
  if (p.kind == "lm" && p.model.empty()) f.fail("model", "kind = \"lm\" needs model = a Hugging Face folder");
  set_if(f.opt_num("temperature"), p.temperature);
  if (p.temperature < 0) f.fail("temperature", "must be >= 0");
  set_if(f.opt_num("top_p"), p.top_p);
  if (p.top_p <= 0 || p.top_p > 1) f.fail("top_p", "must be in (0, 1]");
  set_count(f, "max_new_tokens", p.max_new_tokens, true);
  set_count(f, "feedback_chars", p.feedback_chars);
  set_count(f, "micro_batch", p.micro_batch, true);
  set_if(f.opt_num("grad_clip"), p.grad_clip);
  positive(f, "grad_clip", p.grad_clip);
  set_if(f.opt_bool("checkpoint"), p.checkpoint);
  set_count(f, "generate_batch", p.generate_batch, true);
  set_count(f, "broadcast_bucket_mb", p.broadcast_bucket_mb, true);
  set_if(f.opt_str("device"), p.device);
  {
    const auto& d = p.device;
    const bool cuda_n = d.rfind("cuda:", 0) == 0 && d.size() > 5 &&
                        d.find_first_not_of("0123456789", 5) == std::string::npos;
    if (d != "cpu" && d != "cuda" && !cuda_n) f.fail("device", "must be cpu, cuda or cuda:N");
  }
  set_if(f.opt_str("dtype"), p.dtype);
  if (p.dtype != "auto" && p.dtype != "float32" && p.dtype != "bfloat16" && p.dtype != "float16")
    f.fail("dtype", "must be float32, bfloat16, float16 or auto");
  set_if(f.opt_str("prompt"), p.prompt);
  set_if(f.opt_num("kl_coef"), p.kl_coef);
  if (p.kl_coef < 0) f.fail("kl_coef", "must be >= 0");
  set_if(f.opt_num("behaviour_weight_cap"), p.behaviour_weight_cap);
  if (!(p.behaviour_weight_cap >= 1)) f.fail("behaviour_weight_cap", "must be >= 1");
  set_if(f.opt_str("candidates"), p.candidates);
  set_count(f, "hidden", p.hidden, true);
  set_if(f.opt_num("lr"), p.lr);
  positive(f, "lr", p.lr);
  set_if(f.opt_num("clip"), p.clip);
  positive(f, "clip", p.clip);
  set_if(f.opt_num("entropy_coef"), p.entropy_coef);
  if (p.entropy_coef < 0) f.fail("entropy_coef", "must be >= 0");
  set_count(f, "epochs", p.epochs, true);
}

void load_run(const TomlFields& f, RunConfig& r) {
  f.only({"name", "backend", "suite", "tasks", "steps", "tasks_per_step", "seed", "checkpoint_every",
          "worker_timeout_s", "bind_address", "max_staleness"});
  set_if(f.opt_str("name"), r.name);
  if (r.name.empty() || r.name.find('/') != std::string::npos) f.fail("name", "must be a non-empty name without '/'");
  set_if(f.opt_str("backend"), r.backend);
  if (r.backend != "cpu" && r.backend != "cuda") f.fail("backend", "unknown backend '" + r.backend + "' (cpu, cuda)");
  set_if(f.opt_str("suite"), r.suite);
  set_if(f.opt_str_list("tasks"), r.tasks);
  set_count(f, "steps", r.steps, true);
  set_count(f, "tasks_per_step", r.tasks_per_step, true);
  set_count(f, "seed", r.seed);
  set_count(f, "checkpoint_every", r.checkpoint_every, true);
  set_if(f.opt_num("worker_timeout_s"), r.worker_timeout_s);
  positive(f, "worker_timeout_s", r.worker_timeout_s);
  set_count(f, "max_staleness", r.max_staleness);
  if (r.max_staleness > 8) f.fail("max_staleness", "must be at most 8 (each version behind weakens the update's signal)");
  set_if(f.opt_str("bind_address"), r.bind_address);
}

LeapConfig from_table(const toml::table& t, const std::string& origin) {
  LeapConfig c;
  TomlFields root(t, origin);
  root.only({"compile", "sandbox", "eval", "learner", "policy", "run", "bench", "serve", "memory"});
  if (auto* s = root.opt_table("compile")) load_compile(TomlFields(*s, origin, "compile"), c.compile);
  if (auto* s = root.opt_table("sandbox")) load_sandbox(TomlFields(*s, origin, "sandbox"), c.sandbox);
  if (auto* s = root.opt_table("eval")) load_eval(TomlFields(*s, origin, "eval"), c.eval);
  if (auto* s = root.opt_table("learner")) load_learner(TomlFields(*s, origin, "learner"), c.learner);
  if (auto* s = root.opt_table("bench")) load_bench(TomlFields(*s, origin, "bench"), c.bench);
  if (auto* s = root.opt_table("policy")) load_policy(TomlFields(*s, origin, "policy"), c.policy);
  if (auto* s = root.opt_table("run")) load_run(TomlFields(*s, origin, "run"), c.run);
  if (auto* s = root.opt_table("serve")) load_serve(TomlFields(*s, origin, "serve"), c.serve);
  if (auto* s = root.opt_table("memory")) {
    TomlFields mf(*s, origin, "memory");
    load_memory(mf, c.memory);
    if (c.memory.prompts && c.policy.kind != "lm")
      mf.fail("prompts", "only the LM policy reads text prompts ([policy] kind = \"lm\")");
  }
  return c;
}

}  // namespace

LeapConfig parse_config(const std::string& text, const std::string& origin) {
  return from_table(parse_toml(text, origin), origin);
}

LeapConfig load_config(const std::string& path) { return from_table(parse_toml_file(path), path); }

}  // namespace leap
