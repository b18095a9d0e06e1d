// The learner's group lifecycle: a group of G rollouts runs turn 1; when all its turn-1
// outcomes are in, DCP decides whether its failed rollouts get refinement turns; a group is
// final when no rollout is scheduled any more, and then gets its per-turn advantages.
// Enforces the loop's invariant: exactly one outcome per scheduled rollout-turn.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "learner/dcp.h"
#include "learner/rewards.h"

namespace leap {

// One rollout-turn's result (its TurnResult: correct, speedup, infra_error) in its group.
struct RolloutOutcome {
  uint64_t group = 0;
  int rollout = 0;  // 0..G-1
  int turn = 1;     // 1..T
  TurnResult result;  // infra: leap's fault; the rollout stops without counting as a failure
};

struct GroupEvent {
  enum class Kind { schedule, final } kind = Kind::schedule;
  uint64_t group = 0;
  int turn = 0;                      // schedule: the turn to run
  std::vector<int> rollouts;         // schedule: who runs it
  Difficulty difficulty = Difficulty::easy;
  std::vector<Trajectory> trajectories;            // final
  // final: [rollout][turn], the group's own credit (a sample alone at its turn: 0 here, the
  // step's leave-one-out once the step is complete: step_advantages)
  std::vector<std::vector<double>> advantages;
};

struct DcpCounts {
  int easy = 0, medium = 0, hopeless = 0, voided = 0;
  DcpCounts since(const DcpCounts& b) const { return {easy - b.easy, medium - b.medium, hopeless - b.hopeless, voided - b.voided}; }
};

class GroupTracker {
 public:
  GroupTracker(DcpConfig dcp, RewardConfig reward);
  // Starts a group; its G rollouts are scheduled for turn 1.
  GroupEvent open(uint64_t group);
  // Records one outcome; returns the event it completes (a schedule or the final), if any.
  // Throws LeapError for an outcome that was not scheduled or arrives twice.
  std::vector<GroupEvent> record(const RolloutOutcome& o);
  size_t open_groups() const { return groups_.size(); }
  const DcpCounts& counts() const { return counts_; }

 private:
  struct Group {
    int turn = 1;
    std::vector<bool> pending;  // scheduled for `turn`, outcome not in yet
    std::vector<Trajectory> trajectories;
    std::vector<int> solved_turn;
    Difficulty difficulty = Difficulty::easy;
  };
  GroupEvent advance(uint64_t id, Group& g);

  DcpConfig dcp_;
  RewardConfig reward_;
  std::map<uint64_t, Group> groups_;
  DcpCounts counts_;
};

}  // namespace leap
