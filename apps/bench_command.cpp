// `leap bench dcp`: the loop under identical seed, suite, policy and step budget for LEAP (DCP +
// rank reward) and its baselines (unpruned multi-turn with binary and with Kevin-style rewards,
// single-turn), each a run directory of its own; prints wall-clock and evaluations to reach a
// turn-1 solve rate and each baseline's ratio to LEAP. Roles run as threads of this process.
#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/loop_wiring.h"
#include "common/error.h"
#include "common/paths.h"
#include "common/run_dir.h"

namespace leap {
namespace {

struct Variant {
  std::string name;
  bool dcp;
  std::string reward;
  int max_turns;  // 0: the config's
};

struct Curve {
  std::vector<double> solve1, solve_t, wall, evals;  // per step; wall and evals cumulative
};

Curve read_curve(const std::string& run_dir) {
  Curve c;
  double wall = 0, evals = 0;
  for (const auto& j : read_jsonl(run_dir + "/metrics.jsonl")) {
    wall += j["wall_s"].get<double>();
    evals += j["evaluations"].get<double>();
    c.solve1.push_back(j["solve_at"].front().get<double>());
    c.solve_t.push_back(j["solve_at"].back().get<double>());
    c.wall.push_back(wall);
    c.evals.push_back(evals);
  }
  return c;
}

// Mean turn-1 solve rate over a window of steps ending at `i` (smooths one lucky step).
double smoothed(const std::vector<double>& v, size_t i, size_t window) {
  size_t from = i + 1 >= window ? i + 1 - window : 0;
  double s = 0;
  for (size_t k = from; k <= i; ++k) s += v[k];
  return s / static_cast<double>(i + 1 - from);
}

}  // namespace

int run_bench_dcp(const BenchDcpArgs& a) {
  std::string path = a.config.empty() ? data_dir() + "/configs/demo.toml" : a.config;
  LeapConfig base = load_config(path);
  if (a.steps > 0) base.run.steps = a.steps;
  const std::vector<Variant> variants = {{"leap", true, "rank", 0},
                                         {"unpruned-binary", false, "binary", 0},
                                         {"unpruned-kevin", false, "kevin", 0},
                                         {"single-turn", true, "rank", 1}};
  if (std::filesystem::exists(a.out) && !std::filesystem::is_empty(a.out))
    throw LeapError(a.out + " is not empty: choose another --out");
  std::vector<Curve> curves;
  for (const auto& v : variants) {
    LeapConfig cfg = base;
    cfg.learner.dcp = v.dcp;
    cfg.learner.reward = v.reward;
    if (v.max_turns) cfg.learner.max_turns = v.max_turns;
    RunPlan plan = make_plan(cfg, read_file(path), a.out + "/" + v.name);
    // Progress (rate and ETA per step) on a terminal only, on stderr: stdout keeps the table.
    plan.progress = isatty(STDERR_FILENO);
    plan.progress_label = "  " + v.name + ": ";
    std::cerr << fmt::format("bench dcp: {} ({} steps, {} workers)...\n", v.name, cfg.run.steps, a.workers);
    run_in_process(plan, a.workers, false);
    curves.push_back(read_curve(plan.run_dir));
  }
  // The target: --target, else the best smoothed turn-1 rate that every variant reached.
  const size_t window = 3;
  double target = a.target;
  if (target <= 0) {
    target = 1;
    for (const auto& c : curves) {
      double best = 0;
      for (size_t i = 0; i < c.solve1.size(); ++i) best = std::max(best, smoothed(c.solve1, i, window));
      target = std::min(target, best);
    }
  }
  std::cout << fmt::format("\nDCP benchmark: {} steps, {} tasks per step, G={}, T={}, seed {}; target turn-1 solve "
                           "rate {:.2f} (mean of {} steps)\n\n",
                           base.run.steps, base.run.tasks_per_step, base.learner.group_size, base.learner.max_turns,
                           base.run.seed, target, window);
  std::cout << fmt::format("{:<16} {:>9} {:>10} {:>12} {:>12} {:>9} {:>9} {:>10} {:>12}\n", "variant", "to target",
                           "wall (s)", "evaluations", "total wall", "solve@1", "solve@T", "time/LEAP", "evals/LEAP");
  double leap_wall = 0, leap_evals = 0;
  for (size_t k = 0; k < variants.size(); ++k) {
    const Curve& c = curves[k];
    int hit = -1;
    for (size_t i = 0; i < c.solve1.size() && hit < 0; ++i)
      if (smoothed(c.solve1, i, window) >= target - 1e-9) hit = static_cast<int>(i);
    const size_t n = c.solve1.size(), q = std::max<size_t>(1, n / 4);
    double s1 = 0, st = 0;
    for (size_t i = n - q; i < n; ++i) {
      s1 += c.solve1[i] / static_cast<double>(q);
      st += c.solve_t[i] / static_cast<double>(q);
    }
    const double wall = hit >= 0 ? c.wall[static_cast<size_t>(hit)] : 0;
    const double evals = hit >= 0 ? c.evals[static_cast<size_t>(hit)] : 0;
    if (k == 0) {
      leap_wall = wall;
      leap_evals = evals;
    }
    auto ratio = [](double x, double base_x) { return x > 0 && base_x > 0 ? fmt::format("{:.2f}x", x / base_x) : "-"; };
    std::cout << fmt::format("{:<16} {:>9} {:>10} {:>12} {:>12.1f} {:>9.2f} {:>9.2f} {:>10} {:>12}\n", variants[k].name,
                             hit >= 0 ? fmt::format("step {}", hit + 1) : "never", hit >= 0 ? fmt::format("{:.1f}", wall) : "-",
                             hit >= 0 ? fmt::format("{:.0f}", evals) : "-", c.wall.empty() ? 0.0 : c.wall.back(), s1, st,
                             ratio(wall, leap_wall), ratio(evals, leap_evals));
  }
  std::cout << fmt::format("\nsolve@1 / solve@T: mean of the last quarter of steps. Runs: {}/<variant>/\n", a.out);
  ReportArgs report{a.out + "/" + variants[0].name, {}, a.out + "/report.html"};
  for (size_t k = 1; k < variants.size(); ++k) report.compare.push_back(a.out + "/" + variants[k].name);
  return run_report(report);
}

}  // namespace leap
