// Schedule templates: a kernel written by choosing values for a few knobs of a task's
// template (loop order, vector width, unrolling, remainder handling). The chosen values render
// real CPU or CUDA source that goes through the compile farm and the evaluator like any
// candidate. Some choices are slow, some fail in distinct ways (a static_assert, a zero-filled
// remainder, an endless remainder loop), which is what refinement turns repair.
// Templates: include/leap/schedule/detail/*.h (CPU) and tasks/templates/*.cu (CUDA); see
// docs/schedule-templates.md.
#pragma once
#include <string>
#include <vector>

#include "tasks/task.h"

namespace leap {

struct Knob {
  std::string name;
  std::vector<std::string> values;
};

// The knobs every template takes, in order: order, vector, unroll, tail.
const std::vector<Knob>& schedule_knobs();

// A choice: one value index per knob.
using Choice = std::vector<int>;

// Tasks with a schedule template, in a fixed order (the policy's task vocabulary).
const std::vector<std::string>& schedule_tasks();
bool has_schedule(const std::string& task);
// Index in schedule_tasks(); throws LeapError for a task without a template.
int schedule_task_index(const std::string& task);
std::string schedule_family(const std::string& task);

// "order=row vector=4 unroll=2 tail=scalar"; throws LeapError for an invalid choice.
std::string describe(const Choice& c);
void validate(const Choice& c);

// Source of the task's template with the choice applied. Throws LeapError for a task
// without a template or a backend the task does not support.
std::string render_schedule(const Task& task, Backend backend, const Choice& c);

// The compact form of the same kernel (CPU): the four knob lines and an include of the task's
// template header, `leap/schedule/<task>.h` under include/ (a few dozen tokens instead of ~1.5k:
// what a small language model can learn to write). It compiles to what render_schedule gives.
std::string render_compact(const Task& task, Backend backend, const Choice& c);
// The header a compact source includes: the task's macros, the prelude and its family's template.
std::string schedule_header(const Task& task, Backend backend);
// Its path relative to include/.
std::string schedule_header_path(const std::string& task);

}  // namespace leap
