// A step's metrics record (metrics.jsonl): the learner's result, then the step's time split and
// identity once every rank holds its weights.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/clock.h"
#include "proto/leap.capnp.h"

namespace leap {

// A worker's account of one step's batches.
struct WorkerWork {
  double generate_s = 0, compile_wait_s = 0, compile_cpu_s = 0, evaluate_s = 0;
  uint32_t hits = 0, compiles = 0;
};

// A step from its opening to its metrics record.
struct LiveStep {
  std::vector<std::string> tasks;
  Clock::time_point opened = Clock::now();
  std::map<int, WorkerWork> work;  // by worker rank
  double bookkeeping_s = 0;
  std::string sampler_after;       // the task sampler's state after this step's draw (its checkpoint's)
  nlohmann::json rec;              // from the learner's result on
};

// The record's fields from the learner's result of `step`.
nlohmann::json step_record(int step, proto::StepResult::Reader sr);

// Times of the step's end, as the coordinator measured them.
struct StepTimes {
  double broadcast_s = 0, checkpoint_s = 0, sync_s = 0, wall_s = 0, interval_s = 0;
};
// The step's time split (worker figures per worker, the rest as measured) and its identity.
void complete_record(nlohmann::json& rec, const LiveStep& ls, size_t workers, uint64_t version,
                     const std::string& checksum, const StepTimes& t);

}  // namespace leap
