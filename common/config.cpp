#include "common/config.h"

#include "common/error.h"
#include "common/toml_fields.h"

namespace leap {
namespace {

template <typename T>
void set_if(std::optional<T> v, T& out) {
  if (v) out = *v;
}

void positive(const TomlFields& f, const std::string& key, double v) {
  if (f.has(key) && !(v > 0)) f.fail(key, "must be > 0");
}

void load_compile(const TomlFields& f, CompileConfig& c) {
  f.only({"jobs", "timeout_s", "cxx", "cxx_flags", "cache_dir", "max_diagnostic_lines"});
  if (auto v = f.opt_integer("jobs")) c.jobs = static_cast<int>(*v);
  if (c.jobs < 0) f.fail("jobs", "must be >= 0");
  set_if(f.opt_num("timeout_s"), c.timeout_s);
  positive(f, "timeout_s", c.timeout_s);
  set_if(f.opt_str("cxx"), c.cxx);
  set_if(f.opt_str_list("cxx_flags"), c.cxx_flags);
  set_if(f.opt_str("cache_dir"), c.cache_dir);
  if (auto v = f.opt_integer("max_diagnostic_lines")) c.max_diagnostic_lines = static_cast<int>(*v);
}

void load_sandbox(const TomlFields& f, SandboxConfig& s) {
  f.only({"deadline_s", "cpu_limit_s", "memory_mb", "file_size_bytes", "seccomp", "evaluators", "spares"});
  set_if(f.opt_num("deadline_s"), s.deadline_s);
  positive(f, "deadline_s", s.deadline_s);
  set_if(f.opt_num("cpu_limit_s"), s.cpu_limit_s);
  positive(f, "cpu_limit_s", s.cpu_limit_s);
  if (auto v = f.opt_integer("memory_mb")) s.memory_mb = static_cast<uint64_t>(*v);
  positive(f, "memory_mb", static_cast<double>(s.memory_mb));
  if (auto v = f.opt_integer("file_size_bytes")) s.file_size_bytes = static_cast<uint64_t>(*v);
  set_if(f.opt_bool("seccomp"), s.seccomp);
  if (auto v = f.opt_integer("evaluators")) s.evaluators = static_cast<int>(*v);
  positive(f, "evaluators", s.evaluators);
  if (auto v = f.opt_integer("spares")) s.spares = static_cast<int>(*v);
  if (s.spares < 0) f.fail("spares", "must be >= 0");
}

void load_eval(const TomlFields& f, EvalConfig& e) {
  f.only({"trials", "seed", "warmup_calls", "min_samples", "max_samples", "timing_budget_ms", "rse_target",
          "speedup_bound"});
  if (auto v = f.opt_integer("trials")) e.trials = static_cast<uint32_t>(*v);
  positive(f, "trials", e.trials);
  if (auto v = f.opt_integer("seed")) e.seed = static_cast<uint64_t>(*v);
  if (auto v = f.opt_integer("warmup_calls")) e.warmup_calls = static_cast<uint32_t>(*v);
  if (auto v = f.opt_integer("min_samples")) e.min_samples = static_cast<uint32_t>(*v);
  positive(f, "min_samples", e.min_samples);
  if (auto v = f.opt_integer("max_samples")) e.max_samples = static_cast<uint32_t>(*v);
  if (e.max_samples < e.min_samples) f.fail("max_samples", "must be >= min_samples");
  set_if(f.opt_num("timing_budget_ms"), e.timing_budget_ms);
  positive(f, "timing_budget_ms", e.timing_budget_ms);
  set_if(f.opt_num("rse_target"), e.rse_target);
  positive(f, "rse_target", e.rse_target);
  set_if(f.opt_num("speedup_bound"), e.speedup_bound);
  positive(f, "speedup_bound", e.speedup_bound);
}

LeapConfig from_table(const toml::table& t, const std::string& origin) {
  LeapConfig c;
  TomlFields root(t, origin);
  root.only({"compile", "sandbox", "eval"});
  if (auto* s = root.opt_table("compile")) load_compile(TomlFields(*s, origin, "compile"), c.compile);
  if (auto* s = root.opt_table("sandbox")) load_sandbox(TomlFields(*s, origin, "sandbox"), c.sandbox);
  if (auto* s = root.opt_table("eval")) load_eval(TomlFields(*s, origin, "eval"), c.eval);
  return c;
}

}  // namespace

LeapConfig parse_config(const std::string& text, const std::string& origin) {
  return from_table(parse_toml(text, origin), origin);
}

LeapConfig load_config(const std::string& path) { return from_table(parse_toml_file(path), path); }

}  // namespace leap
