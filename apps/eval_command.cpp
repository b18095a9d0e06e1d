// `leap eval`: compile and evaluate candidates, print a table and a summary, write JSONL.
// Candidate failures are data (exit 0); usage errors exit 2, leap's own failures (an
// infra_error record among the results, or an error) non-zero.
#include <CLI/CLI.hpp>

#include <memory>
#include <fmt/format.h>

#include <map>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "evaluation/eval_pipeline.h"
#include "memory/memory.h"

namespace leap {

struct EvalArgs {
  std::string tasks = "builtin";
  std::string candidates;  // "" = the bundled examples of the backend
  std::string backend = "cpu";
  std::string config;
  std::string out;
  int jobs = 0;
  int evaluators = 0;
  bool quiet = false;
  bool show_feedback = false;  // a failure's first line of feedback under its row
  std::string memory;  // record every outcome in this experience-graph database
};
namespace {

// Column widths that fit the longest task and candidate names (a KernelBench task's name is long).
struct Widths {
  size_t task = 24, candidate = 34;
};

void print_header(const Widths& w) {
  std::cout << fmt::format("{:<{}} {:<{}} {:<36} {:>7} {:>8} {:>10} {:>9}\n", "task", w.task, "candidate", w.candidate,
                           "status", "correct", "speedup", "compile_ms", "eval_ms");
}

// One line per outcome; with `feedback`, a failure's first line of feedback under it.
void print_row(const EvalOutcome& o, const Widths& w, bool feedback) {
  std::string status = verdict_text(o.status, o.check);
  std::string speed = o.status == Status::ok ? fmt::format("{:.2f}x{}", o.speedup, o.speedup_flagged ? "!" : "") : "-";
  std::cout << fmt::format("{:<{}} {:<{}} {:<36} {:>3}/{:<3} {:>8} {:>10.1f} {:>9.1f}\n", o.task, w.task, o.candidate,
                           w.candidate, status, o.correct_trials(), o.trials.size(), speed,
                           o.stages.compile_us / 1000.0, o.stages.eval_us / 1000.0);
  if (feedback && o.status != Status::ok && !o.feedback.empty()) {
    std::string line = o.feedback.substr(0, o.feedback.find('\n'));
    if (line.size() > 200) line = line.substr(0, 197) + "...";
    std::cout << "    " << line << "\n";
  }
  std::cout << std::flush;
}

// Prints the summary and returns it (the exit status reads its infra_error count).
EvalSummary print_summary(const std::vector<EvalOutcome>& outcomes, double wall_s, int restarts,
                          const std::vector<Task>& tasks) {
  auto s = summarize(outcomes);
  std::cout << fmt::format("\n{} candidates in {:.2f} s; evaluator restarts: {}\n", s.total, wall_s, restarts);
  std::string by;
  for (const auto& [st, n] : s.by_status) by += fmt::format("{}={} ", to_string(st), n);
  std::cout << "status: " << by << "\n";
  std::cout << fmt::format("correct: {:.1f}%  fast_1: {:.1f}%  fast_1.5: {:.1f}%  geomean speedup (correct): {:.3f}x\n",
                           100 * s.correct_rate, 100 * s.fast_1, 100 * s.fast_1_5, s.geomean_speedup);
  if (s.infra_errors)
    std::cout << fmt::format("rates over the {} judged candidates; {} ended in infra_error (leap's fault, no verdict on "
                             "the candidate) and are left out\n",
                             s.judged, s.infra_errors);
  // By level, as KernelBench reports: fast_p = correct and faster than the reference by p.
  std::map<std::string, int> level_of;
  for (const auto& t : tasks) level_of[t.name] = t.level;
  std::map<int, std::vector<EvalOutcome>> by_level;
  for (const auto& o : outcomes) by_level[level_of.count(o.task) ? level_of[o.task] : 0].push_back(o);
  std::cout << "\n| level | candidates | correct | fast_0 | fast_1 | fast_1.5 | fast_2 | geomean speedup |\n"
               "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& [level, outs] : by_level) {
    auto l = summarize(outs);
    std::cout << fmt::format("| {} | {} | {:.1f}% | {:.1f}% | {:.1f}% | {:.1f}% | {:.1f}% | {:.3f}x |\n",
                             level ? std::to_string(level) : "?", l.total, 100 * l.correct_rate, 100 * l.fast_0,
                             100 * l.fast_1, 100 * l.fast_1_5, 100 * l.fast_2, l.geomean_speedup);
  }
  return s;
}

// The last non-empty line of a probe's output (the reason), without its trailing newline.
std::string probe_message(const std::string& out) {
  std::string s = out;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  const auto nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

}  // namespace

static int run_eval(const EvalArgs& a) {
  auto log = role_logger("eval");
  LeapConfig cfg = a.config.empty() ? LeapConfig{} : load_config(a.config);
  if (a.jobs > 0) cfg.compile.jobs = a.jobs;
  if (a.evaluators > 0) cfg.sandbox.evaluators = a.evaluators;
  Backend backend = *backend_from(a.backend);
  auto tasks = load_suite(a.tasks);
  std::string cand_path = a.candidates.empty() ? data_dir() + "/examples/" + a.backend : a.candidates;
  auto candidates = load_candidates(cand_path, backend);
  if (a.candidates.empty()) {
    // The bundled examples cover every built-in task; a suite of some of them (refine, layouts, a
    // folder) evaluates its own and says what it left out. Candidates a user names must all fit.
    const size_t skipped = drop_candidates_outside(candidates, tasks);
    if (candidates.empty()) throw LeapError("none of the bundled examples (" + cand_path + ") is for a task of " + a.tasks);
    if (skipped)
      std::cerr << fmt::format("leap eval: {} of the {} bundled examples are for tasks of {}; the other {} skipped\n",
                               candidates.size(), candidates.size() + skipped, a.tasks, skipped);
  }

  if (backend == Backend::cuda) {
    // One clear error instead of an infra_error per candidate on a machine without a usable GPU.
    auto probe = run_command({evald_path(), "--backend", "cuda", "--check-device"}, 120);
    if (probe.exit_code != 0)
      throw LeapError("leap eval --backend cuda: no usable GPU here: " + probe_message(probe.output) +
                      " (evaluate on a machine with an NVIDIA GPU and its driver, or use --backend cpu)");
  }
  std::ofstream out;
  if (!a.out.empty()) {
    out.open(a.out, std::ios::trunc);
    if (!out) throw LeapError(a.out + ": cannot write results file");
  }
  log->info("{} candidates, {} tasks, backend {}", candidates.size(), tasks.size(), a.backend);
  // Every outcome becomes a case of the experience graph (`leap memory`), beside the JSONL.
  std::unique_ptr<memory::Memory> mem;
  std::map<std::string, std::string> source_of;
  if (!a.memory.empty()) {
    mem = std::make_unique<memory::Memory>(a.memory);
    for (const auto& c : candidates) source_of[c.name] = c.source;
  }
  EvalPipeline pipeline(cfg, backend, evald_path(), log);
  Widths widths;
  for (const auto& c : candidates) {
    widths.task = std::max(widths.task, c.task.size());
    widths.candidate = std::max(widths.candidate, c.name.size());
  }
  if (!a.quiet) print_header(widths);
  auto t0 = Clock::now();
  size_t done = 0;
  auto outcomes = pipeline.run(tasks, candidates, [&](const EvalOutcome& o) {
    ++done;
    if (out.is_open()) out << to_json(o).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n" << std::flush;  // nothing produced is lost
    if (mem && o.status != Status::infra_error) mem->add(memory::case_of(o, source_of[o.candidate]));
    if (!a.quiet) print_row(o, widths, a.show_feedback);
    else if (isatty(STDERR_FILENO)) {
      double s = micros_since(t0) / 1e6, rate = static_cast<double>(done) / std::max(s, 1e-9);
      std::cerr << fmt::format("\r{}/{} evaluated, {:.2f}/s, ETA {:.0f} s   ", done, candidates.size(), rate,
                               static_cast<double>(candidates.size() - done) / std::max(rate, 1e-9))
                << std::flush;
    }
  });
  if (a.quiet && isatty(STDERR_FILENO)) std::cerr << "\n";
  const auto summary = print_summary(outcomes, micros_since(t0) / 1e6, pipeline.evaluator_restarts(), tasks);
  if (summary.infra_errors) {
    std::cerr << fmt::format("leap eval: {} of {} evaluations ended in infra_error: leap failed, not the candidates "
                             "(their feedback says how); every record was written\n",
                             summary.infra_errors, summary.total);
    return 3;
  }
  return 0;
}

void add_eval_command(CLI::App& app, Commands& c) {
  auto ea = std::make_shared<EvalArgs>();
  auto* eval = app.add_subcommand("eval", "compile and evaluate candidates against a task suite");
  eval->add_option("--tasks", ea->tasks, "suite folder, task folder, 'builtin' or a bundled variant ('refine', 'layouts')")->capture_default_str();
  eval->add_option("--candidates", ea->candidates, "folder of candidate sources or FILE.jsonl (default: bundled examples)");
  eval->add_option("--backend", ea->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  eval->add_option("--config", ea->config, "TOML config ([compile], [sandbox], [eval])");
  eval->add_option("--out", ea->out, "write one JSON record per candidate here");
  eval->add_option("--jobs", ea->jobs, "parallel compile jobs (default: config, else cores)");
  eval->add_option("--evaluators", ea->evaluators, "warm evaluator processes (default: config)");
  eval->add_flag("--quiet", ea->quiet, "print only the summary");
  eval->add_flag("--show-feedback", ea->show_feedback, "print a failure's first line of feedback under its row");
  eval->add_option("--memory", ea->memory, "record every outcome in this experience-graph database (leap memory)");
  c.add(eval, [ea] { return run_eval(*ea); });
}

}  // namespace leap
