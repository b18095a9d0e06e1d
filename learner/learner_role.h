// The learner role (rank 1): receives every turn outcome, runs the group lifecycle (DCP
// decisions sent to the coordinator), turns final groups into rank-based advantages, updates
// the policy once a step's groups are all final, and broadcasts the weights when the
// coordinator says so. Appends every outcome to outcomes.jsonl as it arrives.
#pragma once
#include <memory>
#include <string>

#include <spdlog/logger.h>

#include "common/loop_links.h"
#include "common/weight_channel.h"
#include "learner/dcp.h"
#include "learner/rewards.h"
#include "memory/memory.h"
#include "policy/policy.h"

namespace leap {

struct LearnerSettings {
  DcpConfig dcp;
  RewardConfig reward;
  std::string run_dir;
  std::string resume_dir;       // checkpoint to start from ("" = fresh)
  int start_step = 0;
  std::string memory_path;      // "" = none; else every turn's outcome becomes a case there
  std::string backend = "cpu";  // of the cases
  bool serve_context = false;   // answer workers' MemoryQuery with the memory's context ([memory] prompts)
  memory::ContextSettings context;
};

class LearnerRole {
 public:
  LearnerRole(LoopLinks& links, WeightChannel& weights, Policy& policy, LearnerSettings s,
              std::shared_ptr<spdlog::logger> log);
  // Until the coordinator says stop; throws LeapError when the loop's invariants break.
  void run();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace leap
