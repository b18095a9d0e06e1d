#include "learner/dcp.h"

#include "common/error.h"

namespace leap {

std::string to_string(Difficulty d) {
  switch (d) {
    case Difficulty::easy: return "easy";
    case Difficulty::medium: return "medium";
    case Difficulty::hopeless: return "hopeless";
    case Difficulty::voided: return "voided";
  }
  return "?";
}

void validate(const DcpConfig& c) {
  if (c.group_size < 2) throw LeapError("learner.group_size must be >= 2");
  if (c.max_turns < 1) throw LeapError("learner.max_turns must be >= 1");
  if (c.t_min < 0 || c.t_max < c.t_min || c.t_max > c.group_size)
    throw LeapError("learner: need 0 <= t_min <= t_max <= group_size");
}

DcpDecision decide_after_turn1(const std::vector<bool>& turn1_correct, const DcpConfig& cfg,
                               const std::vector<bool>& voided) {
  if (static_cast<int>(turn1_correct.size()) != cfg.group_size || (!voided.empty() && voided.size() != turn1_correct.size()))
    throw LeapError("DCP: a group of " + std::to_string(turn1_correct.size()) + " outcomes, expected " +
                    std::to_string(cfg.group_size));
  DcpDecision d;
  std::vector<int> failed;
  int evaluated = 0;
  for (size_t i = 0; i < turn1_correct.size(); ++i) {
    if (!voided.empty() && voided[i]) continue;
    ++evaluated;
    if (!turn1_correct[i]) failed.push_back(static_cast<int>(i));
  }
  if (evaluated == 0) {  // zero failures of nothing evaluated is not "easy"
    d.difficulty = Difficulty::voided;
    return d;
  }
  const int n_fail = static_cast<int>(failed.size());
  const bool all_failed = n_fail > 0 && n_fail == evaluated;
  d.difficulty = n_fail < cfg.t_min                                          ? Difficulty::easy
                 : n_fail > cfg.t_max || (all_failed && !cfg.refine_all_failed) ? Difficulty::hopeless
                                                                            : Difficulty::medium;
  const bool expand = cfg.enabled ? d.difficulty == Difficulty::medium : n_fail > 0;
  d.refine = expand && cfg.max_turns > 1 && n_fail > 0;
  if (d.refine) d.next_turn = failed;
  return d;
}

std::vector<int> next_turn_rollouts(const std::vector<int>& solved_turn, int turn, const DcpConfig& cfg) {
  std::vector<int> next;
  if (turn >= cfg.max_turns) return next;
  for (size_t i = 0; i < solved_turn.size(); ++i)
    if (solved_turn[i] == 0) next.push_back(static_cast<int>(i));
  return next;
}

}  // namespace leap
