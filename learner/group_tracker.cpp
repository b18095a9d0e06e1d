#include "learner/group_tracker.h"

#include <algorithm>

#include "common/error.h"

namespace leap {

GroupTracker::GroupTracker(DcpConfig dcp, RewardConfig reward) : dcp_(dcp), reward_(reward) { validate(dcp_); }

GroupEvent GroupTracker::open(uint64_t id) {
  if (groups_.count(id)) throw LeapError("group " + std::to_string(id) + " is already open");
  Group g;
  size_t n = static_cast<size_t>(dcp_.group_size);
  g.pending.assign(n, true);
  g.trajectories.resize(n);
  g.solved_turn.assign(n, 0);
  groups_.emplace(id, std::move(g));
  GroupEvent e;
  e.group = id;
  e.turn = 1;
  for (int i = 0; i < dcp_.group_size; ++i) e.rollouts.push_back(i);
  return e;
}

std::vector<GroupEvent> GroupTracker::record(const RolloutOutcome& o) {
  auto it = groups_.find(o.group);
  std::string what = "outcome of group " + std::to_string(o.group) + ", rollout " + std::to_string(o.rollout) +
                     ", turn " + std::to_string(o.turn);
  if (it == groups_.end()) throw LeapError(what + ": the group is not open");
  Group& g = it->second;
  if (o.rollout < 0 || o.rollout >= dcp_.group_size || o.turn != g.turn ||
      !g.pending[static_cast<size_t>(o.rollout)])
    throw LeapError(what + ": not scheduled (or already recorded)");
  size_t r = static_cast<size_t>(o.rollout);
  g.pending[r] = false;
  g.trajectories[r].push_back({o.result.correct && !o.result.infra, o.result.speedup, o.result.infra});
  // A rollout voided by an infra_error is not refined further (as if solved, for scheduling).
  if ((o.result.correct || o.result.infra) && !g.solved_turn[r]) g.solved_turn[r] = o.turn;
  if (std::any_of(g.pending.begin(), g.pending.end(), [](bool p) { return p; })) return {};
  GroupEvent e = advance(o.group, g);
  if (e.kind == GroupEvent::Kind::final) groups_.erase(it);
  return {e};
}

GroupEvent GroupTracker::advance(uint64_t id, Group& g) {
  std::vector<int> next;
  if (g.turn == 1) {
    std::vector<bool> turn1, voided;
    // DCP counts failures among the rollouts leap evaluated: a voided one is neither.
    for (const auto& t : g.trajectories) turn1.push_back(t.front().correct), voided.push_back(t.front().infra);
    auto d = decide_after_turn1(turn1, dcp_, voided);
    g.difficulty = d.difficulty;
    (d.difficulty == Difficulty::easy     ? counts_.easy
     : d.difficulty == Difficulty::medium ? counts_.medium
     : d.difficulty == Difficulty::voided ? counts_.voided
                                          : counts_.hopeless)++;
    next = d.next_turn;
  } else {
    next = next_turn_rollouts(g.solved_turn, g.turn, dcp_);
  }
  GroupEvent e;
  e.group = id;
  e.difficulty = g.difficulty;
  if (!next.empty()) {
    g.turn += 1;
    for (int i : next) g.pending[static_cast<size_t>(i)] = true;
    e.kind = GroupEvent::Kind::schedule;
    e.turn = g.turn;
    e.rollouts = next;
    return e;
  }
  e.kind = GroupEvent::Kind::final;
  e.trajectories = g.trajectories;
  auto credit = group_advantages(g.trajectories, reward_);
  e.advantages = std::move(credit.advantages);
  return e;
}

}  // namespace leap
