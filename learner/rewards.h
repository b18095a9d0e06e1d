// Rewards and per-turn advantages of a finished group.
//   rank (LEAP): rollouts ordered by outcome (solved at an earlier turn > solved later >
//     failed; optional speedup tie-break); reward = (peers it beats - peers that beat it) /
//     (G - 1), in [-1, 1]. Per-turn advantage: a positive reward is discounted back from the
//     rollout's final turn by gamma per turn; a non-positive reward applies to every turn.
//   binary: 1 if the rollout was ever solved, else 0, minus the group mean, at every turn
//     (standard GRPO with normalize_std).
//   kevin: per-turn score 0.3 * correct + speedup * correct, discounted returns with gamma
//     (0.4), minus the mean return over the group's turns.
//   trloo (Dr.Kernel's turn-level REINFORCE leave-one-out): a turn-t sample's return is
//     gamma^(s - t) if its rollout is solved at turn s >= t, else 0; its advantage is that
//     return minus the mean return of the other rollouts of its group that reached turn t.
// Per-turn baseline (Baseline::turn; rank and binary): turn-2 samples exist only for rollouts
// that failed turn 1, so a group-wide baseline ranks every refinement below every turn-1 solve
// (for T = 2 the turn-2 advantages of a group sum to -n1 (G - n1) / (G - 1)). Instead, a turn
// t >= 2 sample is compared only with the group's rollouts that reached turn t (its cohort):
// rank, the pairwise tournament within the cohort (discounted like LEAP's reward); binary, the
// cohort's mean. Turn 1 keeps the group's reward. A sample alone in its cohort (under turn or
// trloo) has no peer in its group: its advantage is left to the step (step_leave_one_out).
// Optionally (normalize_std) divided by the group's reward standard deviation.
#pragma once
#include <string>
#include <vector>

namespace leap {

enum class RewardKind { rank, binary, kevin, trloo };
enum class Baseline { group, turn };
std::string to_string(RewardKind k);

struct RewardConfig {
  RewardKind kind = RewardKind::rank;
  Baseline baseline = Baseline::group;
  double gamma = 0.8;               // rank: discount of a positive reward per earlier turn; trloo: of a later success
  double kevin_gamma = 0.4;         // kevin: discount of future turn scores
  bool speedup_tiebreak = false;    // rank: among equal outcomes the faster one ranks higher
  // Divide every advantage of a group by the standard deviation of its rollouts' rewards (rank
  // reward, solved 0/1, or Kevin's first-turn return), as GRPO does; not when they are all equal.
  bool normalize_std = false;
};

struct TurnResult {
  bool correct = false;
  double speedup = 0;
  bool infra = false;  // the evaluation failed on leap's side: never the policy's failure
};

// The turns one rollout took (1..T); the last one is its final turn.
using Trajectory = std::vector<TurnResult>;

// Rank rewards of a group (one per rollout).
std::vector<double> rank_rewards(const std::vector<Trajectory>& group, bool speedup_tiebreak);

// A sample with no peer at its turn in its group.
struct LoneSample {
  int rollout = 0;
  int turn = 1;
};

struct GroupCredit {
  // advantages[i][t]: advantage of rollout i's turn t+1. Rollouts that ended on an infra_error
  // get zeros and are left out of the others' ranking and means.
  std::vector<std::vector<double>> advantages;
  std::vector<LoneSample> lone;  // advantage 0 here; the step's leave-one-out sets it
};

GroupCredit group_advantages(const std::vector<Trajectory>& group, const RewardConfig& cfg);

// The discounted success return of a rollout from turn `turn` on: gamma^(s - turn) when first
// solved at turn s >= turn, else 0.
double turn_return(const Trajectory& t, int turn, double gamma);

// One sample of a step for the leave-one-out fallback.
struct TurnReturn {
  int turn = 1;
  double ret = 0;
};
// For each sample `lone[k]` of `step` (indices): its return minus the mean return of the
// step's other samples at the same turn (every group's); 0 when it has none.
std::vector<double> step_leave_one_out(const std::vector<TurnReturn>& step, const std::vector<size_t>& lone);

// A step's per-turn advantages ([group][rollout][turn]): each group's credit, then each lone
// sample's leave-one-out among the step's samples (those of rollouts not ended by an
// infra_error). The learner's, and the trainers' estimator's (learner/credit_c.cpp).
struct StepCredit {
  std::vector<std::vector<std::vector<double>>> advantages;
  size_t lone = 0;  // samples whose advantage is the step's leave-one-out
};
StepCredit step_advantages(const std::vector<std::vector<Trajectory>>& step, const RewardConfig& cfg);

}  // namespace leap
