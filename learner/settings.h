// The learner's settings from the [learner] section of the configuration (parsed and validated
// there: common/config.cpp); DCP and the rewards have no defaults of their own.
#pragma once
#include "common/config.h"
#include "learner/dcp.h"
#include "learner/rewards.h"

namespace leap {

inline DcpConfig dcp_config(const LearnerConfig& l) {
  auto [lo, hi] = dcp_counts(l);
  return {l.group_size, l.max_turns, lo, hi, l.dcp, l.refine_all_failed};
}

inline RewardConfig reward_config(const LearnerConfig& l) {
  RewardKind kind = l.reward == "binary"  ? RewardKind::binary
                    : l.reward == "kevin" ? RewardKind::kevin
                    : l.reward == "trloo" ? RewardKind::trloo
                                          : RewardKind::rank;
  RewardConfig r;
  r.kind = kind;
  r.baseline = l.advantage_baseline == "turn" ? Baseline::turn : Baseline::group;
  r.gamma = l.gamma;
  r.kevin_gamma = l.kevin_gamma;
  r.speedup_tiebreak = l.speedup_tiebreak;
  r.normalize_std = l.advantage_norm == "group_std";
  return r;
}

}  // namespace leap
