// `leap bench dcp`: LEAP's experiments (Tables 5 and 6 of the paper) as a reproduction. Every
// variant of the grid trains under the same suite, policy, step budget and seeds, each run with
// its own cold compile cache; every `eval_every` steps its weights are evaluated greedily on
// held-out tasks (never trained on) at turns 1..T with feedback; the target accuracy is fixed
// before the runs. Prints mean [min-max] over the seeds and each variant's ratio to LEAP.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <fstream>
#include <set>

#include "apps/commands.h"
#include "bench/bench_util.h"
#include "apps/loop_wiring.h"
#include "common/error.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/run_dir.h"
#include "policy/policy.h"
#include "report/charts.h"
#include "worker/eval_pipeline.h"

namespace fs = std::filesystem;

namespace leap {
namespace {

struct Variant {
  std::string name;
  std::string range;   // DCP: lt50 | ge50 | full (every group with a failure)
  std::string reward;  // rank | binary | kevin
  int max_turns = 0;   // 0: the config's
  std::string what;
};

const std::vector<Variant>& grid() {
  static const std::vector<Variant> g = {
      {"rank-ge50", "ge50", "rank", 0, "LEAP: DCP >=50% failing, rank reward (Tables 5, 6)"},
      {"rank-lt50", "lt50", "rank", 0, "DCP <50% failing, rank reward (Table 5)"},
      {"rank-full", "full", "rank", 0, "every group with a failure refined, rank reward (Table 5)"},
      {"binary-ge50", "ge50", "binary", 0, "DCP >=50%, binary reward: standard multi-turn GRPO (Table 6)"},
      {"kevin-ge50", "ge50", "kevin", 0, "DCP >=50%, Kevin's discounted scores (gamma 0.4)"},
      {"single-turn", "ge50", "rank", 1, "one turn, rank reward"}};
  return g;
}

// The DCP range as failure counts for the group size: <50% is 1..ceil(G/2)-1, >=50% is
// ceil(G/2)..G, full is DCP off.
void apply(const Variant& v, LearnerConfig& l) {
  const int g = l.group_size, half = (g + 1) / 2;
  l.dcp = v.range != "full";
  l.t_min = v.range == "lt50" ? 0 : half;
  l.t_max = v.range == "lt50" ? half - 1 : g;
  l.reward = v.reward;
  if (v.max_turns) l.max_turns = v.max_turns;
}

struct Eval {
  int step = 0;              // completed training steps (0: the initial weights)
  std::vector<double> acc;   // held-out accuracy by turn t (solved at turn <= t)
  double turns_per_solved = 0;
  double wall_s = 0, evaluations = 0;  // the training's, up to this step
};

struct RunScore {
  std::vector<Eval> evals;
  std::vector<double> wall, evaluations;  // cumulative, per step
  double refined = 0, recovered = 0;      // % of groups refined; % of refined groups that gained a solve
  int hit = -1;                           // the first evaluation from which the run stays at the target
};

// Greedy, turns 1..T with the previous attempt's status and feedback, on the held-out tasks.
Eval score_held_out(Policy& policy, const std::vector<Task>& tasks, Backend backend, int turns, EvalPipeline& pipe) {
  Eval e;
  std::vector<PolicyContext> ctx(tasks.size());
  std::vector<int> solved_at(tasks.size(), 0);
  for (int t = 1; t <= turns; ++t) {
    std::vector<CandidateSource> cands;
    std::vector<size_t> who;
    std::vector<Generation> gens;
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (solved_at[i]) continue;
      ctx[i].turn = t;
      ctx[i].greedy = true;
      gens.push_back(policy.generate(tasks[i], backend, ctx[i], 0));
      cands.push_back({tasks[i].name, fmt::format("{}.heldout.t{}", tasks[i].name, t), gens.back().source, "held-out"});
      who.push_back(i);
    }
    if (cands.empty()) break;
    auto outs = pipe.run(tasks, cands);
    for (size_t k = 0; k < outs.size(); ++k) {
      size_t i = who[k];
      if (outs[k].status == Status::ok) solved_at[i] = t;
      ctx[i].prev_actions = gens[k].actions;
      ctx[i].prev_status = to_string(outs[k].status);
      ctx[i].prev_feedback = outs[k].feedback;
    }
  }
  double solved = 0, turns_sum = 0;
  for (int t = 1; t <= turns; ++t) {
    double n = 0;
    for (int s : solved_at) n += s > 0 && s <= t;
    e.acc.push_back(n / static_cast<double>(tasks.size()));
  }
  for (int s : solved_at)
    if (s) solved += 1, turns_sum += s;
  e.turns_per_solved = solved ? turns_sum / solved : 0;
  return e;
}

// Refinement figures of a finished run, from its outcomes.
void score_training(const std::string& run_dir, RunScore& r) {
  struct Group {
    std::set<int> solved;  // rollouts solved so far
    int max_turn = 1;
    bool solved_later = false;
  };
  std::map<uint64_t, Group> groups;
  for (const auto& o : read_jsonl(run_dir + "/outcomes.jsonl")) {
    auto& g = groups[o["group"].get<uint64_t>()];
    int turn = o["turn"].get<int>(), rollout = o["rollout"].get<int>();
    g.max_turn = std::max(g.max_turn, turn);
    if (o["status"] == "ok" && g.solved.insert(rollout).second) g.solved_later = g.solved_later || turn > 1;
  }
  double refined = 0, recovered = 0;
  for (const auto& [id, g] : groups)
    if (g.max_turn > 1) refined += 1, recovered += g.solved_later;
  r.refined = groups.empty() ? 0 : 100 * refined / static_cast<double>(groups.size());
  r.recovered = refined ? 100 * recovered / refined : 0;
  double wall = 0, evals = 0;
  for (const auto& m : read_jsonl(run_dir + "/metrics.jsonl")) {
    wall += m["wall_s"].get<double>();
    evals += m["evaluations"].get<double>();
    r.wall.push_back(wall);
    r.evaluations.push_back(evals);
  }
}

// Held-out tasks: `n` of the tasks, spread over the sorted list (so over the families).
std::vector<std::string> pick_held_out(std::vector<std::string> names, int n) {
  std::sort(names.begin(), names.end());
  if (n <= 0) n = std::max(1, static_cast<int>(names.size()) / 4);
  if (n >= static_cast<int>(names.size()))
    throw LeapError(fmt::format("bench dcp: holding out {} of {} tasks leaves none to train on", n, names.size()));
  std::vector<std::string> out;
  for (int j = 0; j < n; ++j)
    out.push_back(names[static_cast<size_t>((2 * j + 1) * static_cast<int>(names.size()) / (2 * n))]);
  return out;
}

}  // namespace

int run_bench_dcp(const BenchDcpArgs& a) {
  const std::string path = a.config.empty() ? data_dir() + "/configs/demo.toml" : a.config;
  const std::string config_text = read_file(path);
  LeapConfig base = load_config(path);
  if (a.steps > 0) base.run.steps = a.steps;
  if (a.seeds > 0) base.bench.seeds = a.seeds;
  if (a.target > 0) base.bench.target = a.target;
  if (a.eval_every > 0) base.bench.eval_every = a.eval_every;
  if (a.held_out > 0) base.bench.held_out = a.held_out;
  std::vector<Variant> variants;
  for (const auto& v : grid())
    if (a.variants.empty() || std::find(a.variants.begin(), a.variants.end(), v.name) != a.variants.end())
      variants.push_back(v);
  for (const auto& name : a.variants)
    if (std::none_of(grid().begin(), grid().end(), [&](const Variant& v) { return v.name == name; }))
      throw LeapError("bench dcp: unknown variant '" + name + "'");
  if (fs::exists(a.out) && !fs::is_empty(a.out)) throw LeapError(a.out + " is not empty: choose another --out");

  // The split, from every task the policy can write (or [run] tasks).
  RunPlan all = make_plan(base, config_text, a.out + "/plan");
  std::vector<std::string> names;
  for (const auto& t : all.tasks) names.push_back(t.name);
  std::vector<std::string> held = base.bench.held_out_tasks;
  for (const auto& h : held)
    if (std::find(names.begin(), names.end(), h) == names.end())
      throw LeapError("bench dcp: held-out task '" + h + "' is not among the tasks the policy can write");
  if (held.size() >= names.size()) throw LeapError("bench dcp: holding out every task leaves none to train on");
  if (held.empty()) held = pick_held_out(names, base.bench.held_out);
  std::vector<Task> held_tasks;
  base.run.tasks.clear();
  for (const auto& t : all.tasks) {
    if (std::find(held.begin(), held.end(), t.name) != held.end()) held_tasks.push_back(t);
    else base.run.tasks.push_back(t.name);
  }
  base.run.checkpoint_every = base.bench.eval_every;
  const int seeds = base.bench.seeds;
  const uint64_t seed0 = base.run.seed;

  const int T = base.learner.max_turns;
  auto log = role_logger("bench");
  // Held-out compiles go through a cache of their own and are not part of any training wall.
  LeapConfig hcfg = base;
  hcfg.compile.cache_dir = a.out + "/caches/held-out";
  EvalPipeline held_out_pipe(hcfg, all.backend, evald_path(), log);
  std::map<std::string, std::vector<RunScore>> scores;
  for (const auto& v : variants) {
    for (int k = 0; k < seeds; ++k) {
      LeapConfig cfg = base;
      apply(v, cfg.learner);
      cfg.run.seed = seed0 + static_cast<uint64_t>(k);
      const std::string run_dir = fmt::format("{}/{}/seed-{}", a.out, v.name, k);
      // A cold cache of its own: a later variant must not compile less because an earlier one ran.
      cfg.compile.cache_dir = fmt::format("{}/caches/{}-seed-{}", a.out, v.name, k);
      RunPlan plan = make_plan(cfg, config_text, run_dir);
      plan.progress = isatty(STDERR_FILENO);
      plan.progress_label = fmt::format("  {} seed {}: ", v.name, k);
      std::cerr << fmt::format("bench dcp: {} seed {} ({} steps, {} workers)...\n", v.name, k, cfg.run.steps, a.workers);
      run_in_process(plan, a.workers, false);

      RunScore r;
      score_training(run_dir, r);
      // Held-out evaluation of the initial weights and of every checkpoint (every eval_every
      // steps and the last), greedily, at the config's T for every variant (single-turn too:
      // the same inference for all).
      std::vector<int> at = {0};
      for (int step = cfg.run.checkpoint_every; step < cfg.run.steps; step += cfg.run.checkpoint_every) at.push_back(step);
      at.push_back(cfg.run.steps);
      for (int step : at) {
        auto policy = make_policy(cfg.policy, cfg.run.seed);
        if (step > 0) policy->load(checkpoint_dir(run_dir, step));
        Eval e = score_held_out(*policy, held_tasks, plan.backend, T, held_out_pipe);
        e.step = step;
        if (step > 0) {
          e.wall_s = r.wall[static_cast<size_t>(step - 1)];
          e.evaluations = r.evaluations[static_cast<size_t>(step - 1)];
        }
        r.evals.push_back(e);
        // Beside the run's own records, for leap report's grid.
        append_jsonl(run_dir + "/held_out.jsonl",
                     {{"step", step},
                      {"wall_s", e.wall_s},
                      {"evaluations", e.evaluations},
                      {"accuracy", e.acc},
                      {"turns_per_solved", e.turns_per_solved},
                      {"tasks", held}});
      }
      std::vector<double> at_T;
      for (const auto& e : r.evals) at_T.push_back(e.acc.back());
      r.hit = bench::first_held_at(at_T, base.bench.target);
      scores[v.name].push_back(std::move(r));
    }
  }

  // The table: final held-out accuracy by turn, time to the target, efficiency.
  std::string held_list;
  for (const auto& h : held) held_list += (held_list.empty() ? "" : ", ") + h;
  std::cout << fmt::format(
      "\nDCP benchmark: {} steps of {} groups, G={}, T={}, {} seed(s) from {}; {} training tasks, held out: {}. "
      "Target: held-out accuracy at turn {} >= {:.2f} (fixed before the runs), evaluated every {} steps.\n\n",
      base.run.steps, base.run.tasks_per_step, base.learner.group_size, T, seeds, seed0, base.run.tasks.size(),
      held_list, T, base.bench.target, base.bench.eval_every);
  std::string head = "| variant |";
  std::string rule = "|---|";
  for (int t = 1; t <= T; ++t) head += fmt::format(" held-out acc@{} |", t), rule += "---:|";
  head += " reached | time to target s | evals to target | turns/solved (held-out) | refined % | recovery % | "
          "evaluations | wall s | time/LEAP |";
  rule += "---:|---:|---:|---:|---:|---:|---:|---:|---:|";
  std::cout << head << "\n" << rule << "\n";
  double leap_time = 0;
  for (const auto& v : variants) {
    const auto& rs = scores[v.name];
    std::vector<std::vector<double>> acc(static_cast<size_t>(T));
    std::vector<double> hit_wall, hit_evals, tps, refined, recovered, evals, wall;
    for (const auto& r : rs) {
      const Eval& last = r.evals.back();
      for (int t = 0; t < T; ++t)
        acc[static_cast<size_t>(t)].push_back(t < static_cast<int>(last.acc.size()) ? last.acc[static_cast<size_t>(t)]
                                                                                     : last.acc.back());
      if (r.hit >= 0) {
        const Eval& h = r.evals[static_cast<size_t>(r.hit)];
        hit_wall.push_back(h.wall_s);
        hit_evals.push_back(h.evaluations);
      }
      if (last.turns_per_solved > 0) tps.push_back(last.turns_per_solved);
      refined.push_back(r.refined);
      recovered.push_back(r.recovered);
      evals.push_back(r.evaluations.empty() ? 0 : r.evaluations.back());
      wall.push_back(r.wall.empty() ? 0 : r.wall.back());
    }
    report::Spread tt = report::spread_of(hit_wall);
    if (&v == &variants.front()) leap_time = tt.n == rs.size() ? tt.mean : 0;
    std::string row = "| " + v.name + " |";
    for (int t = 0; t < T; ++t) row += " " + report::mean_range(report::spread_of(acc[static_cast<size_t>(t)]), "{:.2f}") + " |";
    const bool all_hit = tt.n == rs.size();
    row += fmt::format(" {}/{} | {} | {} | {} | {} | {} | {} | {} | {} |", tt.n, rs.size(), report::mean_range(tt, "{:.1f}"),
                       report::mean_range(report::spread_of(hit_evals), "{:.0f}"), report::mean_range(report::spread_of(tps), "{:.2f}"), report::mean_range(report::spread_of(refined), "{:.1f}"),
                       report::mean_range(report::spread_of(recovered), "{:.1f}"), report::mean_range(report::spread_of(evals), "{:.0f}"), report::mean_range(report::spread_of(wall), "{:.1f}"),
                       all_hit && leap_time > 0 ? fmt::format("{:.2f}x", tt.mean / leap_time) : "-");
    std::cout << row << "\n";
  }
  std::cout << "\nRows:\n";
  for (const auto& v : variants) std::cout << fmt::format("- {}: {}\n", v.name, v.what);
  std::cout << fmt::format(
      "\nmean [min-max] over seeds. Held-out accuracy: the last checkpoint, greedy, solved at turn <= t. Time and "
      "evaluations to target: training wall-clock and evaluations up to the first checkpoint from which held-out "
      "accuracy stays at the target to the run's end (mean over the seeds that reached it). Refined: groups given "
      "turn 2; recovery: refined groups in which a rollout failing at turn 1 was solved later. Each run compiled into a cold cache of its own. Runs: {}/<variant>/seed-<k>/\n",
      a.out);
  nlohmann::json order = nlohmann::json::array();
  for (const auto& v : variants) order.push_back(v.name);
  std::ofstream(a.out + "/bench.json") << nlohmann::json{{"variants", order}, {"seeds", seeds},
                                                          {"target", base.bench.target}, {"held_out", held}}
                                              .dump(2)
                                       << "\n";
  return run_report(ReportArgs{a.out, {}, a.out + "/report.html", ""});
}

}  // namespace leap
