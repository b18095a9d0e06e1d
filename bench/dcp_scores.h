// Scores of one `leap bench dcp` run: held-out accuracy by turn at each checkpoint, the training's
// refinement figures, and time and evaluations to the targets (bench/dcp_bench.cpp's table).
#pragma once
#include <string>
#include <vector>

#include "common/config.h"
#include "evaluation/eval_pipeline.h"
#include "policy/policy.h"
#include "report/charts.h"
#include "tasks/task.h"

namespace leap::dcp {

struct Eval {
  std::vector<double> acc;   // held-out accuracy by turn t (solved at turn <= t)
  double turns_used = 0, solved = 0;   // held-out: turns attempted over all tasks, tasks solved
  double wall_s = 0, evaluations = 0;  // the training's, up to this step
};

struct RunScore {
  std::vector<Eval> evals;
  std::vector<double> wall, evaluations;  // cumulative, per step
  double activated = 0, recovered = 0;    // % of groups with a turn-1 failure given turn 2; % of those that gained a solve
  double turns_per_solve = 0;             // training: turn evaluations / rollouts solved
  int hit_1 = -1, hit_T = -1;             // the first evaluation from which the run stays at the target (turn 1, turn T)
};

// Time and evaluations to a target over a variant's seeds: the seeds that reached it.
struct ToTarget {
  report::Spread wall, evals;
  size_t reached = 0;
};

// Chains of turns 1..T on the held-out tasks, each later turn given the previous attempt's status
// and feedback: `samples` = 1, one greedy chain per task; more, that many sampled chains per task
// (the policy's temperature), chain j of task i with seed 1000 * (j + 1) + i at every checkpoint.
// Accuracy at turn t: the share of chains solved by turn t.
Eval score_held_out(Policy& policy, const std::vector<Task>& tasks, Backend backend, int turns, int samples,
                    EvalPipeline& pipe);
// The run's training wall-clock and evaluations, cumulative per step, from its metrics.
void score_progress(const std::string& run_dir, RunScore& r);
// Held-out tasks: `n` of the tasks, spread over the sorted list (so over the families).
std::vector<std::string> pick_held_out(std::vector<std::string> names, int n);
// A finished run's scores, from its files (outcomes, metrics, held_out.jsonl).
RunScore load_run(const std::string& run_dir, const BenchConfig& b);
// Time and evaluations to a target over a variant's seeds (`hit`: which target).
ToTarget to_target(const std::vector<RunScore>& rs, int RunScore::*hit);
std::string ratio(const ToTarget& v, const ToTarget& leap, size_t runs);  // "1.23x", or "-" where a seed missed

}  // namespace leap::dcp
