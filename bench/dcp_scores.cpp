#include "bench/dcp_scores.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "bench/bench_util.h"
#include "common/error.h"
#include "common/run_dir.h"

namespace leap::dcp {
namespace {

// Refinement figures of a finished run, from its outcomes (the paper's definitions).
void score_training(const std::string& run_dir, RunScore& r) {
  struct Group {
    std::set<int> solved;  // rollouts solved so far
    bool turn1_failure = false, refined = false, solved_later = false;
  };
  std::map<uint64_t, Group> groups;
  double turns = 0;
  for (const auto& o : read_jsonl(run_dir + "/outcomes.jsonl")) {
    auto& g = groups[o["group"].get<uint64_t>()];
    const int turn = o["turn"].get<int>(), rollout = o["rollout"].get<int>();
    const std::string status = o["status"];
    turns += 1;
    if (turn == 1 && status != "ok" && status != "infra_error") g.turn1_failure = true;
    g.refined = g.refined || turn > 1;
    if (status == "ok" && g.solved.insert(rollout).second) g.solved_later = g.solved_later || turn > 1;
  }
  double failing = 0, refined = 0, recovered = 0, solved = 0;
  for (const auto& [id, g] : groups) {
    failing += g.turn1_failure;
    refined += g.refined;
    recovered += g.refined && g.solved_later;
    solved += static_cast<double>(g.solved.size());
  }
  r.activated = failing ? 100 * refined / failing : 0;
  r.recovered = refined ? 100 * recovered / refined : 0;
  r.turns_per_solve = solved ? turns / solved : 0;
}

}  // namespace

// The run's training wall-clock and evaluations, cumulative per step, from its metrics.
void score_progress(const std::string& run_dir, RunScore& r) {
  double wall = 0, evals = 0;
  for (const auto& m : read_jsonl(run_dir + "/metrics.jsonl")) {
    wall += m["wall_s"].get<double>();
    evals += m["evaluations"].get<double>();
    r.wall.push_back(wall);
    r.evaluations.push_back(evals);
  }
}

// Chains of turns 1..T on the held-out tasks, each later turn given the previous attempt's status
// and feedback: `samples` = 1, one greedy chain per task; more, that many sampled chains per task
// (the policy's temperature), chain j of task i with seed 1000 * (j + 1) + i at every checkpoint.
// Accuracy at turn t: the share of chains solved by turn t.
Eval score_held_out(Policy& policy, const std::vector<Task>& tasks, Backend backend, int turns, int samples,
                    EvalPipeline& pipe) {
  Eval e;
  struct Chain {
    size_t task;
    uint64_t seed;
    PolicyContext ctx;
    int solved_at = 0;
  };
  std::vector<Chain> chains;
  for (int j = 0; j < samples; ++j)
    for (size_t i = 0; i < tasks.size(); ++i) {
      Chain c{i, 1000 * static_cast<uint64_t>(j + 1) + i, {}, 0};
      c.ctx.greedy = samples == 1;
      chains.push_back(c);
    }
  for (int t = 1; t <= turns; ++t) {
    std::vector<GenerateRequest> reqs;
    std::vector<size_t> who;
    for (size_t c = 0; c < chains.size(); ++c) {
      if (chains[c].solved_at) continue;
      chains[c].ctx.turn = t;
      reqs.push_back({&tasks[chains[c].task], backend, chains[c].ctx, chains[c].seed + 100000 * static_cast<uint64_t>(t)});
      who.push_back(c);
    }
    if (reqs.empty()) break;
    auto gens = policy.generate_batch(reqs);  // an LM decodes them together
    std::vector<CandidateSource> cands;
    for (size_t k = 0; k < gens.size(); ++k) {
      const auto& task = tasks[chains[who[k]].task];
      cands.push_back({task.name, fmt::format("{}.heldout.c{}.t{}", task.name, who[k], t), gens[k].source, "held-out"});
    }
    auto outs = pipe.run(tasks, cands);
    for (size_t k = 0; k < outs.size(); ++k) {
      Chain& c = chains[who[k]];
      e.turns_used += 1;
      if (outs[k].status == Status::ok) c.solved_at = t;
      c.ctx.prev_actions = gens[k].actions;
      c.ctx.prev_status = outs[k].status;
      c.ctx.prev_check = outs[k].check;
      c.ctx.prev_feedback = outs[k].feedback;
    }
  }
  for (int t = 1; t <= turns; ++t) {
    double n = 0;
    for (const auto& c : chains) n += c.solved_at > 0 && c.solved_at <= t;
    e.acc.push_back(n / static_cast<double>(chains.size()));
  }
  for (const auto& c : chains) e.solved += c.solved_at > 0;
  return e;
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

ToTarget to_target(const std::vector<RunScore>& rs, int RunScore::*hit) {
  std::vector<double> wall, evals;
  for (const auto& r : rs)
    if (r.*hit >= 0) {
      const Eval& h = r.evals[static_cast<size_t>(r.*hit)];
      wall.push_back(h.wall_s);
      evals.push_back(h.evaluations);
    }
  return {report::spread_of(wall), report::spread_of(evals), wall.size()};
}

std::string ratio(const ToTarget& v, const ToTarget& leap, size_t runs) {
  return v.reached == runs && leap.reached == runs && leap.evals.mean > 0 ? fmt::format("{:.2f}x", v.evals.mean / leap.evals.mean)
                                                                          : "-";
}

// A finished run's scores, from its files (outcomes, metrics, held_out.jsonl).
RunScore load_run(const std::string& run_dir, const BenchConfig& b) {
  RunScore r;
  score_training(run_dir, r);
  score_progress(run_dir, r);
  std::vector<double> at_1, at_T;
  for (const auto& h : read_jsonl(run_dir + "/held_out.jsonl")) {
    Eval e;
    e.acc = h["accuracy"].get<std::vector<double>>();
    e.turns_used = h["turns_used"].get<double>();
    e.solved = h["solved"].get<double>();
    e.wall_s = h["wall_s"].get<double>();
    e.evaluations = h["evaluations"].get<double>();
    at_1.push_back(e.acc.front());
    at_T.push_back(e.acc.back());
    r.evals.push_back(std::move(e));
  }
  if (r.evals.empty()) throw LeapError(run_dir + ": no held-out evaluation");
  r.hit_1 = bench::first_held_at(at_1, b.target_turn1);
  r.hit_T = bench::first_held_at(at_T, b.target);
  return r;
}

}  // namespace leap::dcp
