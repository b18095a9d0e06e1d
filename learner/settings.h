// The learner's settings from the [learner] section of the configuration.
#pragma once
#include "common/config.h"
#include "learner/dcp.h"
#include "learner/rewards.h"

namespace leap {

inline DcpConfig dcp_config(const LearnerConfig& l) {
  auto [lo, hi] = dcp_counts(l);
  return {l.group_size, l.max_turns, lo, hi, l.dcp};
}

inline RewardConfig reward_config(const LearnerConfig& l) {
  RewardKind kind = l.reward == "binary" ? RewardKind::binary : l.reward == "kevin" ? RewardKind::kevin : RewardKind::rank;
  return {kind, l.gamma, l.kevin_gamma, l.speedup_tiebreak, l.advantage_norm == "group_std"};
}

}  // namespace leap
