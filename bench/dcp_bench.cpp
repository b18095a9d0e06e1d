// `leap bench dcp`: LEAP's experiments (Tables 2, 5 and 6 of the paper) as a reproduction, with
// the config's policy (the schedule network or a language model, [policy] kind = "lm"). Every
// variant of the grid trains under the same suite, policy, step budget and seeds, each run with
// its own cold compile cache; every `eval_every` steps its weights are evaluated greedily on
// held-out tasks (never trained on) at turns 1..T with feedback; the turn-1 and turn-T targets
// are fixed before the runs. Prints mean [min-max] over the seeds and each variant's evaluations
// to the targets over LEAP's.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <fstream>
#include <set>
#include <thread>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "bench/dcp_scores.h"
#include "common/cores.h"
#include "common/error.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/run_dir.h"
#include "common/subprocess.h"
#include "evaluation/eval_pipeline.h"
#include "loop/loop_wiring.h"
#include "policy/policy.h"
#include "report/charts.h"
#include "report/report.h"

namespace fs = std::filesystem;

namespace leap {
namespace {

using dcp::Eval;
using dcp::RunScore;
using dcp::ToTarget;
using dcp::load_run;
using dcp::pick_held_out;
using dcp::ratio;
using dcp::score_held_out;
using dcp::score_progress;
using dcp::to_target;

struct Variant {
  std::string name;
  std::string range;   // DCP: lt50 | ge50 | full (every group with a failure)
  std::string reward;  // rank | binary | kevin | trloo
  int max_turns = 0;   // 0: the config's
  bool refine_all_failed = false;
  std::string baseline = "group";  // advantage_baseline
  bool group_std = false;          // advantage_norm = group_std
  bool in_grid = true;             // run when no --variants are named
  std::string what;
};

const std::vector<Variant>& grid() {
  static const std::vector<Variant> g = {
      {"leap", "ge50", "rank", 0, false, "group", false, true,
       "LEAP: DCP refines groups with >= 50% failing at turn 1, all-failed (hopeless) groups pruned; rank reward"},
      {"leap-all-failed", "ge50", "rank", 0, true, "group", false, true,
       "the other reading of DCP: >= 50% failing, all-failed groups refined too; rank reward"},
      {"lt50", "lt50", "rank", 0, false, "group", false, true, "DCP refines groups with < 50% failing; rank reward (Table 5)"},
      {"full", "full", "rank", 0, false, "group", false, true,
       "unpruned multi-turn: every group with a failure refined; rank reward (Table 5)"},
      {"grpo", "ge50", "binary", 0, false, "group", true, true,
       "standard multi-turn GRPO: binary reward, group mean and std (Table 6); LEAP's DCP"},
      {"trloo", "ge50", "trloo", 0, false, "group", false, true,
       "Dr.Kernel's TRLOO: per-turn returns, leave-one-out baseline; LEAP's DCP"},
      {"leap-turn", "ge50", "rank", 0, false, "turn", false, true,
       "LEAP with advantage_baseline = turn: a refinement ranked only among its group's rollouts at that turn"},
      {"single-turn", "ge50", "rank", 1, false, "group", false, true, "one turn, rank reward"},
      {"kevin", "ge50", "kevin", 0, false, "group", false, false, "Kevin's discounted per-turn scores (gamma 0.4); LEAP's DCP"}};
  return g;
}

// The DCP range as failure counts for the group size: <50% is 1..ceil(G/2)-1, >=50% is
// ceil(G/2)..G (all-failed included only by refine_all_failed), full is DCP off.
void apply(const Variant& v, LearnerConfig& l) {
  const int g = l.group_size, half = (g + 1) / 2;
  l.dcp = v.range != "full";
  l.t_min = v.range == "lt50" ? 1 : half;
  l.t_max = v.range == "lt50" ? half - 1 : g;
  l.refine_all_failed = v.refine_all_failed;
  l.reward = v.reward;
  l.advantage_baseline = v.baseline;
  l.advantage_norm = v.group_std ? "group_std" : "none";
  if (v.max_turns) l.max_turns = v.max_turns;
}

// The table: final held-out accuracy by turn, evaluations and time to each target, efficiency.
void print_table(const std::vector<Variant>& variants, std::map<std::string, std::vector<RunScore>>& scores, int T) {
  std::string head = "| variant |", rule = "|---|";
  for (int t = 1; t <= T; ++t) head += fmt::format(" acc@{} |", t), rule += "---:|";
  head += " reached@1 | evals to target@1 | time to target@1 s | reached@T | evals to target@T | time to target@T s | "
          "evals/LEAP@1 | evals/LEAP@T | turns/solve | turns/solve (held-out) | activated % | recovery % | evaluations | wall s |";
  rule += "---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
  std::cout << head << "\n" << rule << "\n";
  const auto& leap_runs = scores[variants.front().name];
  const ToTarget leap1 = to_target(leap_runs, &RunScore::hit_1), leapT = to_target(leap_runs, &RunScore::hit_T);
  for (const auto& v : variants) {
    const auto& rs = scores[v.name];
    std::vector<std::vector<double>> acc(static_cast<size_t>(T));
    std::vector<double> tps, tps_held, activated, recovered, evals, wall;
    for (const auto& r : rs) {
      const Eval& last = r.evals.back();
      for (int t = 0; t < T; ++t) acc[static_cast<size_t>(t)].push_back(last.acc[static_cast<size_t>(t)]);
      if (r.turns_per_solve > 0) tps.push_back(r.turns_per_solve);
      if (last.solved > 0) tps_held.push_back(last.turns_used / last.solved);
      activated.push_back(r.activated);
      recovered.push_back(r.recovered);
      evals.push_back(r.evaluations.empty() ? 0 : r.evaluations.back());
      wall.push_back(r.wall.empty() ? 0 : r.wall.back());
    }
    const ToTarget t1 = to_target(rs, &RunScore::hit_1), tT = to_target(rs, &RunScore::hit_T);
    std::string row = "| " + v.name + " |";
    for (int t = 0; t < T; ++t) row += " " + report::mean_range(report::spread_of(acc[static_cast<size_t>(t)]), "{:.2f}") + " |";
    auto mr = [](const std::vector<double>& x, const char* f) { return report::mean_range(report::spread_of(x), f); };
    row += fmt::format(" {}/{} | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |", t1.reached, rs.size(),
                       report::mean_range(t1.evals, "{:.0f}"), report::mean_range(t1.wall, "{:.1f}"), tT.reached, rs.size(),
                       report::mean_range(tT.evals, "{:.0f}"), report::mean_range(tT.wall, "{:.1f}"),
                       ratio(t1, leap1, rs.size()), ratio(tT, leapT, rs.size()), mr(tps, "{:.2f}"), mr(tps_held, "{:.2f}"),
                       mr(activated, "{:.1f}"), mr(recovered, "{:.1f}"), mr(evals, "{:.0f}"), mr(wall, "{:.1f}"));
    std::cout << row << "\n";
  }
}

// The grid's runs as `jobs` processes at a time (this program with --run-one), each training and
// evaluating one (variant, seed); a run that fails stops the grid with its log's tail.
void run_in_processes(const BenchDcpArgs& a, const std::vector<Variant>& variants, int seeds) {
  std::vector<std::string> base = {"/proc/self/exe", "bench", "dcp", "--out", a.out, "--workers", std::to_string(a.workers)};
  auto opt = [&](const char* flag, const std::string& v, bool given) {
    if (given) base.insert(base.end(), {flag, v});
  };
  opt("--config", a.config, !a.config.empty());
  opt("--steps", std::to_string(a.steps), a.steps > 0);
  opt("--seeds", std::to_string(a.seeds), a.seeds > 0);
  opt("--target", fmt::format("{}", a.target), a.target > 0);
  opt("--target-turn1", fmt::format("{}", a.target_turn1), a.target_turn1 > 0);
  opt("--eval-every", std::to_string(a.eval_every), a.eval_every > 0);
  opt("--held-out", std::to_string(a.held_out), a.held_out > 0);
  std::string names;
  for (const auto& v : variants) names += (names.empty() ? "" : ",") + v.name;
  base.insert(base.end(), {"--variants", names});
  std::vector<std::pair<std::string, int>> todo;
  for (const auto& v : variants)
    for (int k = 0; k < seeds; ++k) todo.emplace_back(v.name, k);
  fs::create_directories(a.out + "/logs");
  // Slot s of the `jobs` runs at once keeps to its own cores: runs sharing cores would see each
  // other's load in their wall-clock and in every judge's core (each pins to its first usable one).
  const auto cores = usable_cores();
  const size_t n = cores.size(), jobs = static_cast<size_t>(a.jobs);
  auto cores_of = [&](int slot) {  // slot s: cores [s n / jobs, (s + 1) n / jobs), one at least
    const size_t s = static_cast<size_t>(slot), from = s * n / jobs, to = std::max((s + 1) * n / jobs, from + 1);
    std::string list;
    for (size_t i = from; i < to; ++i) list += (list.empty() ? "" : ",") + std::to_string(cores[i % n]);
    return list;
  };
  Launcher launcher;
  struct Running {
    ChildProcess child;
    std::string log;
    int slot;
  };
  std::vector<Running> running;
  std::vector<bool> busy(static_cast<size_t>(a.jobs), false);
  size_t next = 0;
  while (next < todo.size() || !running.empty()) {
    while (next < todo.size() && static_cast<int>(running.size()) < a.jobs) {
      const int slot = static_cast<int>(std::find(busy.begin(), busy.end(), false) - busy.begin());
      const std::string id = fmt::format("{}:{}", todo[next].first, todo[next].second);
      const std::string log = fmt::format("{}/logs/{}-seed-{}.log", a.out, todo[next].first, todo[next].second);
      const std::string slot_cores = cores_of(slot);
      SpawnSpec spec;
      spec.argv = base;
      spec.argv.insert(spec.argv.end(), {"--run-one", id, "--cores", slot_cores});
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) throw LeapError("bench dcp: cannot write " + log);
      spec.stdout_fd = spec.stderr_fd = fd;
      running.push_back({launcher.spawn(spec), log, slot});
      busy[static_cast<size_t>(slot)] = true;
      ::close(fd);
      std::cerr << fmt::format("bench dcp: {} started on cores {} ({} of {})\n", id, slot_cores, ++next, todo.size());
    }
    for (auto it = running.begin(); it != running.end();) {
      auto st = it->child.try_wait();
      if (!st) {
        ++it;
        continue;
      }
      if (!WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
        const std::string text = read_file(it->log);
        throw LeapError("bench dcp: a run failed (" + it->log + "):\n" + text.substr(text.size() > 2000 ? text.size() - 2000 : 0));
      }
      busy[static_cast<size_t>(it->slot)] = false;
      it = running.erase(it);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// The grid as planned before any run: the config with the command line's overrides, the rows,
// and the held-out split.
struct Grid {
  BenchDcpArgs args;
  std::string config_text;
  LeapConfig base;  // run.tasks: the training tasks
  std::vector<Variant> variants;
  std::vector<std::string> held;
  std::vector<Task> held_tasks;
  Backend backend = Backend::cpu;
};

Grid plan_grid(const BenchDcpArgs& a) {
  Grid g;
  g.args = a;
  const std::string path = a.config.empty() ? data_dir() + "/configs/demo.toml" : a.config;
  g.config_text = read_file(path);
  LeapConfig& base = g.base;
  base = load_config(path);
  if (a.steps > 0) base.run.steps = a.steps;
  if (a.seeds > 0) base.bench.seeds = a.seeds;
  if (a.target > 0) base.bench.target = a.target;
  if (a.target_turn1 > 0) base.bench.target_turn1 = a.target_turn1;
  if (a.eval_every > 0) base.bench.eval_every = a.eval_every;
  if (a.held_out > 0) base.bench.held_out = a.held_out;
  for (const auto& v : grid())
    if (a.variants.empty() ? v.in_grid : std::find(a.variants.begin(), a.variants.end(), v.name) != a.variants.end())
      g.variants.push_back(v);
  for (const auto& name : a.variants)
    if (std::none_of(grid().begin(), grid().end(), [&](const Variant& v) { return v.name == name; }))
      throw LeapError("bench dcp: unknown variant '" + name + "'");
  if (a.run_one.empty() && !a.summarize && fs::exists(a.out) && !fs::is_empty(a.out))
    throw LeapError(a.out + " is not empty: choose another --out");
  // The split, from every task the policy can write (or [run] tasks).
  const std::string plan_dir = !a.run_one.empty() ? a.out + "/logs/plan-" + a.run_one
                               : a.summarize       ? a.out + "/logs/plan-summary"
                                                   : a.out + "/plan";
  RunPlan all = make_plan(base, g.config_text, plan_dir);
  g.backend = all.backend;
  std::vector<std::string> names;
  for (const auto& t : all.tasks) names.push_back(t.name);
  g.held = base.bench.held_out_tasks;
  for (const auto& h : g.held)
    if (std::find(names.begin(), names.end(), h) == names.end())
      throw LeapError("bench dcp: held-out task '" + h + "' is not among the tasks the policy can write");
  if (g.held.size() >= names.size()) throw LeapError("bench dcp: holding out every task leaves none to train on");
  if (g.held.empty()) g.held = pick_held_out(names, base.bench.held_out);
  base.run.tasks.clear();
  for (const auto& t : all.tasks) {
    if (std::find(g.held.begin(), g.held.end(), t.name) != g.held.end()) g.held_tasks.push_back(t);
    else base.run.tasks.push_back(t.name);
  }
  base.run.checkpoint_every = base.bench.eval_every;
  return g;
}

std::string run_dir_of(const Grid& g, const std::string& variant, int k) {
  return fmt::format("{}/{}/seed-{}", g.args.out, variant, k);
}

// One run: training, then held-out evaluation of the initial weights and of every checkpoint
// (every eval_every steps and the last) at the config's T for every row (single-turn too: the
// same inference for all), written to the run's held_out.jsonl.
void train_and_evaluate(const Grid& g, const Variant& v, int k) {
  const BenchDcpArgs& a = g.args;
  LeapConfig cfg = g.base;
  apply(v, cfg.learner);
  cfg.run.seed = g.base.run.seed + static_cast<uint64_t>(k);
  const std::string run_dir = run_dir_of(g, v.name, k);
  // A cold cache of its own: a later variant must not compile less because an earlier one ran.
  cfg.compile.cache_dir = fmt::format("{}/caches/{}-seed-{}", a.out, v.name, k);
  RunPlan plan = make_plan(cfg, g.config_text, run_dir);
  plan.progress = isatty(STDERR_FILENO) && a.jobs <= 1;
  plan.progress_label = fmt::format("  {} seed {}: ", v.name, k);
  std::cerr << fmt::format("bench dcp: {} seed {} ({} steps, {} workers)...\n", v.name, k, cfg.run.steps, a.workers);
  run_in_process(plan, a.workers, false);
  RunScore r;
  score_progress(run_dir, r);  // the held-out records carry the training's cost up to each checkpoint
  // Held-out compiles go through a cache of their own and are not part of any training wall.
  LeapConfig hcfg = cfg;
  hcfg.compile.cache_dir = fmt::format("{}/caches/held-out-{}-seed-{}", a.out, v.name, k);
  EvalPipeline held_out_pipe(hcfg, g.backend, evald_path(), role_logger("bench"));
  std::vector<int> at = {0};
  for (int step = cfg.run.checkpoint_every; step < cfg.run.steps; step += cfg.run.checkpoint_every) at.push_back(step);
  at.push_back(cfg.run.steps);
  for (int step : at) {
    auto policy = make_policy(cfg.policy, cfg.run.seed);
    if (step > 0) policy->load(checkpoint_dir(run_dir, step));
    Eval e = score_held_out(*policy, g.held_tasks, g.backend, g.base.learner.max_turns, g.base.bench.held_out_samples,
                            held_out_pipe);
    append_jsonl(run_dir + "/held_out.jsonl",
                 {{"step", step},
                  {"wall_s", step > 0 ? r.wall[static_cast<size_t>(step - 1)] : 0.0},
                  {"evaluations", step > 0 ? r.evaluations[static_cast<size_t>(step - 1)] : 0.0},
                  {"accuracy", e.acc},
                  {"turns_used", e.turns_used},
                  {"solved", e.solved},
                  {"tasks", g.held}});
  }
}

// The table with what it is of, the rows' meanings and the definitions; bench.json for leap report.
void print_summary(const Grid& g, std::map<std::string, std::vector<RunScore>>& scores) {
  const LeapConfig& base = g.base;
  const int T = base.learner.max_turns, seeds = base.bench.seeds;
  std::string held_list;
  for (const auto& h : g.held) held_list += (held_list.empty() ? "" : ", ") + h;
  std::cout << fmt::format(
      "\nDCP benchmark, {} policy: {} steps of {} groups, G={}, T={}, {} seed(s) from {}; {} training tasks, {} held out: {}. "
      "Targets (fixed before the runs): held-out accuracy at turn 1 >= {:.2f} and at turn {} >= {:.2f}, evaluated every {} "
      "steps, {}.\n\n",
      base.policy.kind, base.run.steps, base.run.tasks_per_step, base.learner.group_size, T, seeds, base.run.seed,
      base.run.tasks.size(), g.held.size(), held_list, base.bench.target_turn1, T, base.bench.target, base.bench.eval_every,
      base.bench.held_out_samples == 1 ? std::string("greedy")
                                       : fmt::format("{} sampled chains per task", base.bench.held_out_samples));
  print_table(g.variants, scores, T);
  // Every row's step-0 turn 1 of seed k is the same weights, prompts and samples: a spread among
  // them is the judge's verdicts moving with the machine, not a difference between methods. (Later
  // turns differ by design: their prompts carry feedback on fresh random inputs.)
  double spread = 0;
  for (int k = 0; k < seeds && g.variants.size() > 1; ++k) {
    double lo = 1, hi = 0;
    for (const auto& v : g.variants) {
      const double acc = scores[v.name][static_cast<size_t>(k)].evals.front().acc.front();
      lo = std::min(lo, acc);
      hi = std::max(hi, acc);
    }
    spread = std::max(spread, hi - lo);
  }
  if (g.variants.size() > 1)
    std::cout << fmt::format(
        "\nVerdict stability: the rows' step-0 held-out acc@1 of one seed (the same weights, prompts and samples) differ "
        "by {:.3f} at most{}.\n",
        spread, spread > 0 ? ": the judge's verdicts moved between runs (differences between rows this small are noise)" : "");
  std::cout << "\nRows:\n";
  for (const auto& v : g.variants) std::cout << fmt::format("- {}: {}\n", v.name, v.what);
  std::cout << fmt::format(
      "\nmean [min-max] over seeds. acc@t: held-out accuracy of the last checkpoint, solved at turn <= t (greedy, or "
      "the share of [bench] held_out_samples sampled chains per task). "
      "Evaluations and time to a target: training evaluations and wall-clock up to the first checkpoint from which "
      "held-out accuracy stays at the target to the run's end (mean over the seeds that reached it); evals/LEAP: that "
      "mean over the first row's, when every seed of both reached it. turns/solve: training turn evaluations per "
      "rollout solved (held-out: turns attempted per task solved). activated: groups with a turn-1 failure that got "
      "turn 2; recovery: activated groups in which a rollout failing at turn 1 was solved later. Each run compiled "
      "into a cold cache of its own. Runs: {}/<variant>/seed-<k>/\n",
      g.args.out);
  nlohmann::json order = nlohmann::json::array();
  for (const auto& v : g.variants) order.push_back(v.name);
  std::ofstream(g.args.out + "/bench.json") << nlohmann::json{{"variants", order}, {"seeds", seeds},
                                                               {"target", base.bench.target},
                                                               {"target_turn1", base.bench.target_turn1},
                                                               {"policy", base.policy.kind}, {"held_out", g.held}}
                                                   .dump(2)
                                            << "\n";
}

}  // namespace

int run_bench_dcp(const BenchDcpArgs& a) {
  const Grid g = plan_grid(a);
  const int seeds = g.base.bench.seeds;
  if (!a.run_one.empty()) {  // one run of the grid, in a process of its own (--jobs)
    if (!a.cores.empty() && !pin_to(a.cores)) throw LeapError("bench dcp: cannot keep to cores given by --cores");
    const auto colon = a.run_one.rfind(':');
    const std::string name = colon == std::string::npos ? "" : a.run_one.substr(0, colon);
    auto v = std::find_if(g.variants.begin(), g.variants.end(), [&](const Variant& x) { return x.name == name; });
    if (v == g.variants.end()) throw LeapError("bench dcp: --run-one takes VARIANT:SEED of the grid");
    train_and_evaluate(g, *v, std::stoi(a.run_one.substr(colon + 1)));
    return 0;
  }
  if (!a.summarize && a.jobs <= 1) {
    for (const auto& v : g.variants)
      for (int k = 0; k < seeds; ++k) train_and_evaluate(g, v, k);
  } else if (!a.summarize) {
    run_in_processes(a, g.variants, seeds);
  }  // --summarize: the runs are already there
  std::map<std::string, std::vector<RunScore>> scores;
  for (const auto& v : g.variants)
    for (int k = 0; k < seeds; ++k) scores[v.name].push_back(load_run(run_dir_of(g, v.name, k), g.base.bench));
  print_summary(g, scores);
  return run_report(ReportArgs{a.out, {}, a.out + "/report.html", ""});
}

}  // namespace leap
