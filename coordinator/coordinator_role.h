// The coordinator role (rank 0): owns the task stream (a seeded sampler), shards each group's
// rollout-turns over the workers (least outstanding work first), forwards the learner's
// refinement decisions as new assignments, closes every step with the weight broadcast, and
// writes metrics.jsonl, the progress line and checkpoints. A worker that holds work and stays
// silent past [run] worker_timeout_s stops the run with a message naming it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "common/config.h"
#include "common/loop_links.h"

namespace leap {

struct CoordinatorSettings {
  RunConfig run;
  int group_size = 8;
  int max_turns = 3;
  std::vector<std::string> tasks;   // the task stream samples from these
  std::string run_dir;
  std::string resume_dir;           // checkpoint to continue from ("" = fresh)
  bool progress = true;             // a line per step on stdout
  std::string progress_label;       // when set: the line goes to stderr, prefixed (benchmarks)
};

class CoordinatorRole {
 public:
  CoordinatorRole(LoopLinks& links, CoordinatorSettings s, std::shared_ptr<spdlog::logger> log);
  // Runs the remaining steps, then stops the other roles. Throws LeapError on a dead worker or
  // broken invariant (the caller aborts the job).
  void run();
  // Sends stop to every other rank (also after an error, for roles still listening).
  void stop_all(const std::string& reason);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// The seed of one rollout-turn: the same wherever and whenever it runs.
uint64_t rollout_seed(uint64_t run_seed, uint64_t group, uint32_t rollout, uint32_t turn);

}  // namespace leap
