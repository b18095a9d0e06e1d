// Difficulty-Conditioned Pruning (LEAP): after turn 1 of a group of G rollouts, only groups of
// medium difficulty get refinement turns. n_fail < t_min: easy, stop. n_fail > t_max, or every
// evaluated rollout failed (the method's "overly catastrophic" groups; unless
// refine_all_failed): hopeless, stop. Otherwise medium: the failed rollouts get the next turn
// with their feedback, until solved or the turn limit. With DCP off, every group with a failure
// is refined (the unpruned multi-turn baseline). Pure bookkeeping: no transport, no LibTorch.
// The settings come from [learner] only (learner/settings.h: dcp_config); no defaults here.
#pragma once
#include <string>
#include <vector>

namespace leap {

struct DcpConfig {
  int group_size;          // G rollouts per task
  int max_turns;           // T
  int t_min;               // fewer failures than this: easy
  int t_max;               // more failures than this: hopeless
  bool enabled;            // false: refine every group with a failure
  bool refine_all_failed;  // true: a group whose rollouts all failed is medium when t_max allows
};

// voided: no rollout of the group was evaluated at turn 1 (every one an infra_error, leap's own
// failure): nothing is known of its difficulty, and it is refined no further.
enum class Difficulty { easy, medium, hopeless, voided };
std::string to_string(Difficulty d);

struct DcpDecision {
  Difficulty difficulty = Difficulty::easy;
  bool refine = false;           // the group gets turn 2
  std::vector<int> next_turn;    // rollouts (indices) that get turn 2
};

// `turn1_correct[i]`: rollout i solved the task at turn 1; `voided[i]` (empty: none): its
// evaluation failed on leap's side (infra_error), so it is neither a failure nor a success and
// gets no further turn. Sizes must be the group size.
DcpDecision decide_after_turn1(const std::vector<bool>& turn1_correct, const DcpConfig& cfg,
                               const std::vector<bool>& voided = {});

// Rollouts of a refined group that get turn `turn + 1` after `turn` (>= 1): those not solved
// yet, while turn < T. `solved_turn[i]` is the turn rollout i was first solved at, 0 if never.
std::vector<int> next_turn_rollouts(const std::vector<int>& solved_turn, int turn, const DcpConfig& cfg);

// Throws LeapError for inconsistent settings (t_min > t_max, G < 2, T < 1).
void validate(const DcpConfig& cfg);

}  // namespace leap
