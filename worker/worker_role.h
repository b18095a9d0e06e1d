// The worker role (ranks >= 2): generates candidates for its assignments with the local policy
// replica, compiles and evaluates them through the pipeline (compiles overlap evaluation), and
// streams every rollout-turn's result to the learner as soon as it exists. Between steps it
// joins the weight broadcast. Candidates run only in leap-evald processes.
#pragma once
#include <array>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include <spdlog/logger.h>

#include "common/loop_links.h"
#include "common/weight_channel.h"
#include "evaluation/eval_pipeline.h"
#include "policy/policy.h"
#include "tasks/task.h"

namespace leap {

class WorkerRole {
 public:
  WorkerRole(LoopLinks& links, WeightChannel& weights, Policy& policy, EvalPipeline& pipeline, std::vector<Task> tasks,
             Backend backend, std::shared_ptr<spdlog::logger> log, bool memory_prompts = false);
  // Until the coordinator says stop.
  void run();

 private:
  struct Pending;
  struct Turn;
  // One batch of assignments: read, generated (compiles start as each part is written), judged.
  void process(std::vector<kj::Array<capnp::word>>& batch);
  void read_assignments(std::vector<kj::Array<capnp::word>>& batch, Turn& t);
  void generate(Turn& t);
  void evaluate(Turn& t);
  void send_result(const Turn& t, const Pending& p, const EvalOutcome& o);
  void report_progress(Turn& t);
  void sync(uint64_t version);
  // The memory's context for every request, asked of the learner ([memory] prompts).
  void ask_memory(std::vector<GenerateRequest>& requests, const std::vector<std::array<uint64_t, 4>>& keys);
  std::optional<kj::Array<capnp::word>> next_message(std::chrono::milliseconds wait);

  LoopLinks& links_;
  WeightChannel& weights_;
  Policy& policy_;
  EvalPipeline& pipeline_;
  std::vector<Task> tasks_;
  Backend backend_;
  std::shared_ptr<spdlog::logger> log_;
  uint64_t version_ = 0;  // of the weights this worker generates with
  bool version_known_ = false;   // version_ is known (a sync, or the first assignment's)
  bool memory_prompts_ = false;
  uint64_t next_query_ = 0;
  std::deque<kj::Array<capnp::word>> held_;  // messages that arrived while waiting for the memory
};

}  // namespace leap
