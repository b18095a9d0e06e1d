// The schedule policy: a small network that writes a kernel by choosing a value for each knob
// of the task's schedule template, conditioned on the task and on the previous turn's choice
// and outcome class. Context ids: [task index, turn, previous choice (4, -1 at turn 1),
// previous status index (-1 at turn 1)]; action ids: the choice.
#pragma once
#include <memory>

#include "policy/policy.h"

namespace leap {

std::unique_ptr<Policy> make_schedule_policy(const PolicyConfig& cfg, uint64_t seed);

}  // namespace leap
