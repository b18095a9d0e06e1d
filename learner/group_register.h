// The DCP group register of leap serve: rollouts a trainer runs for one prompt (verl's uid, G of them)
// report their turn-1 verdicts here, and the group's DCP decision (learner/dcp.h, the learner's own
// code and [learner] settings) is made once all G are in or the group's deadline passes, the
// missing ones voided, so a lost rollout cannot block its group. Pure bookkeeping with the time
// passed in: no transport, no clock of its own.
#pragma once
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/error.h"
#include "learner/dcp.h"

namespace leap {

struct GroupState {
  int group_size = 0;
  int reported = 0, failed = 0, voided = 0;  // turn-1 reports in; failures and infra_errors among them
  double deadline = 0;                       // when the group is decided without the missing reports
  bool decided = false;
  Difficulty difficulty = Difficulty::easy;  // decided only
  bool refine = false;                       // decided: the group's failed rollouts get more turns
  bool late = false;                         // this report came after the decision: that rollout stops
};

// A report the register refuses: what kind of refusal, and the field at fault.
class RegisterError : public LeapError {
 public:
  enum class Kind { invalid, conflict, full };
  RegisterError(Kind kind, std::string field, const std::string& message)
      : LeapError(field + ": " + message), kind(kind), field(std::move(field)) {}
  Kind kind;
  std::string field;
};

class DcpRegister {
 public:
  // `learner`: the [learner] settings (the group size is each group's own); `keep_s`: how long a
  // decided group is remembered; `max_groups`: open and remembered groups at most.
  DcpRegister(LearnerConfig learner, double keep_s = 3600, size_t max_groups = 100000);
  // One rollout's turn-1 verdict. The first report opens the group with its size and deadline
  // (`now + deadline_s`); later ones must name the same size. Throws RegisterError: invalid (a
  // size DCP refuses), conflict (a different size, more reports than the size) or full.
  GroupState report(const std::string& group, int group_size, bool correct, bool infra, double deadline_s, double now);
  // The group's state, decided if its deadline has passed; nullopt for a group never reported.
  std::optional<GroupState> get(const std::string& group, double now);
  int max_turns() const { return learner_.max_turns; }

 private:
  struct Group {
    GroupState state;
    std::vector<bool> correct, voided;  // reports in arrival order
    double decided_at = 0;
  };
  void decide_if_due(Group& g, double now);
  void forget_old(double now);

  LearnerConfig learner_;
  double keep_s_;
  size_t max_groups_;
  std::mutex mu_;
  std::map<std::string, Group> groups_;
};

}  // namespace leap
