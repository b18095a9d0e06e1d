// Rewards and per-turn advantages of a finished group.
//   rank (LEAP): rollouts ordered by outcome (solved at an earlier turn > solved later >
//     failed; optional speedup tie-break); reward = (peers it beats - peers that beat it) /
//     (G - 1), in [-1, 1]. Per-turn advantage: a positive reward is discounted back from the
//     rollout's final turn by gamma per turn; a non-positive reward applies to every turn.
//   binary: 1 if the rollout was ever solved, else 0, minus the group mean, at every turn.
//   kevin: per-turn score 0.3 * correct + speedup * correct, discounted returns with gamma
//     (0.4), minus the mean return over the group's turns.
// Optionally (normalize_std) divided by the group's reward standard deviation.
#pragma once
#include <string>
#include <vector>

namespace leap {

enum class RewardKind { rank, binary, kevin };
std::string to_string(RewardKind k);

struct RewardConfig {
  RewardKind kind = RewardKind::rank;
  double gamma = 0.8;               // rank: discount of a positive reward per earlier turn
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

// advantages[i][t]: advantage of rollout i's turn t+1. Rollouts that ended on an infra_error
// get zeros and are left out of the others' ranking and means.
std::vector<std::vector<double>> group_advantages(const std::vector<Trajectory>& group, const RewardConfig& cfg);

}  // namespace leap
