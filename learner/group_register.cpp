#include "learner/group_register.h"

#include <utility>

#include "learner/settings.h"

namespace leap {

DcpRegister::DcpRegister(LearnerConfig learner, double keep_s, size_t max_groups)
    : learner_(std::move(learner)), keep_s_(keep_s), max_groups_(max_groups) {}

void DcpRegister::decide_if_due(Group& g, double now) {
  auto& s = g.state;
  if (s.decided || (s.reported < s.group_size && now < s.deadline)) return;
  LearnerConfig l = learner_;
  l.group_size = s.group_size;
  std::vector<bool> voided = g.voided;
  voided.resize(static_cast<size_t>(s.group_size), true);  // never reported: neither failure nor success
  std::vector<bool> correct = g.correct;
  correct.resize(static_cast<size_t>(s.group_size), false);
  auto d = decide_after_turn1(correct, dcp_config(l), voided);
  s.decided = true;
  s.difficulty = d.difficulty;
  s.refine = d.refine;
  g.decided_at = now;
}

void DcpRegister::forget_old(double now) {
  for (auto it = groups_.begin(); it != groups_.end();) {
    decide_if_due(it->second, now);
    it = it->second.state.decided && it->second.decided_at + keep_s_ < now ? groups_.erase(it) : std::next(it);
  }
}

GroupState DcpRegister::report(const std::string& group, int group_size, bool correct, bool infra, double deadline_s,
                               double now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(group);
  if (it == groups_.end()) {
    LearnerConfig l = learner_;
    l.group_size = group_size;
    try {
      validate(dcp_config(l));
    } catch (const LeapError& e) {
      throw RegisterError(RegisterError::Kind::invalid, "group_size", e.what());
    }
    if (groups_.size() >= max_groups_) forget_old(now);
    if (groups_.size() >= max_groups_)
      throw RegisterError(RegisterError::Kind::full, "group",
                          "the register holds " + std::to_string(max_groups_) + " groups; try again later");
    it = groups_.emplace(group, Group{}).first;
    it->second.state.group_size = group_size;
    it->second.state.deadline = now + deadline_s;
  }
  Group& g = it->second;
  GroupState& s = g.state;
  if (group_size != s.group_size)
    throw RegisterError(RegisterError::Kind::conflict, "group_size",
                        "group '" + group + "' has " + std::to_string(s.group_size) + " rollouts, not " +
                            std::to_string(group_size));
  if (s.reported >= s.group_size)
    throw RegisterError(RegisterError::Kind::conflict, "group",
                        "all " + std::to_string(s.group_size) + " rollouts of group '" + group + "' reported already");
  decide_if_due(g, now);
  const bool late = s.decided;
  ++s.reported;
  if (!late) {
    g.correct.push_back(correct && !infra);
    g.voided.push_back(infra);
    s.failed += !correct && !infra;
    s.voided += infra;
    decide_if_due(g, now);
  }
  GroupState out = s;
  out.late = late;
  return out;
}

std::optional<GroupState> DcpRegister::get(const std::string& group, double now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(group);
  if (it == groups_.end()) return std::nullopt;
  decide_if_due(it->second, now);
  return it->second.state;
}

}  // namespace leap
