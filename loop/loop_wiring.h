// Wiring of `leap run` shared by the MPI program and the in-process runner used by tests: the
// run plan (config, tasks, run directory, resume point) and one rank's role.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/loop_links.h"
#include "common/weight_channel.h"
#include "tasks/task.h"

namespace leap {

struct RunPlan {
  LeapConfig cfg;
  std::string config_text;           // copied into the run directory
  Backend backend = Backend::cpu;
  std::vector<Task> tasks;           // tasks the policy can write on the backend
  std::string run_dir;
  std::string resume_dir;            // "" = fresh start
  int start_step = 0;
  bool progress = true;
  std::string progress_label;        // see CoordinatorSettings
};

// Loads the suite and selects the tasks; throws LeapError with the reason.
RunPlan make_plan(const LeapConfig& cfg, const std::string& config_text, const std::string& run_dir);
// Rank 0's part of the start: a fresh run needs an empty or new run directory; --resume needs
// a checkpoint in it. Fills resume_dir / start_step. Throws LeapError with what to do.
void prepare_run_dir(RunPlan& plan, bool resume);
// Runs the role of links.rank() to its end. `weights`: the learner's and workers' broadcast
// (the coordinator takes no part in it and gets nullptr).
void run_role(const RunPlan& plan, LoopLinks& links, WeightChannel* weights);
// Every role as a thread of this process over inproc sockets, `workers` workers.
void run_in_process(RunPlan plan, int workers, bool resume);

}  // namespace leap
