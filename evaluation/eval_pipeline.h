// The evaluation pipeline of one worker: candidates go to the compile farm all at once and
// are evaluated as their compiles finish (the first finished, in candidate order), so
// compilation overlaps evaluation.
// Every candidate yields exactly one outcome.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <spdlog/logger.h>

#include "common/clock.h"
#include "common/config.h"
#include "compile_farm/farm.h"
#include "evaluation/evaluator.h"
#include "tasks/candidates.h"

namespace leap {

// The GPU of each of `evaluators` judges: [sandbox] gpus spread round-robin, gpus = 0 meaning
// the `visible` GPUs (0 visible: unknown, one per judge). Throws when gpus exceeds visible.
std::vector<int> evaluator_gpus(int evaluators, int gpus, int visible);

class EvalPipeline {
 public:
  EvalPipeline(const LeapConfig& cfg, Backend backend, const std::string& evald_path,
               std::shared_ptr<spdlog::logger> log);

  using Sink = std::function<void(const EvalOutcome&)>;
  // Outcomes in candidate order; `sink` sees each as soon as it exists (serialised). `compiles`:
  // the candidates' compiles already submitted with submit_compile (one per candidate, in order);
  // empty: submitted here. `tick`: called about every 0.25 s while the run waits (serialised with
  // the sink; a worker's heartbeat while its first candidates still compile).
  std::vector<EvalOutcome> run(const std::vector<Task>& tasks, const std::vector<CandidateSource>& candidates,
                               const Sink& sink = nullptr, std::vector<std::shared_future<CompileResult>> compiles = {},
                               const std::function<void()>& tick = nullptr);
  // A candidate's compile, started now on the farm (for run).
  std::shared_future<CompileResult> submit_compile(const CandidateSource& c);
  int evaluator_restarts() const;
  // Waits until every judge has started (they start with the pipeline, in the background); throws
  // LeapError naming the first that failed. Seconds waited.
  double await_evaluators();
  // Each candidate right after the one before it, whenever compiles finish: for suites where what a
  // candidate leaves behind must reach the next one (an attack, then an honest candidate).
  void evaluate_in_order(bool on) { in_order_ = on; }

  // One candidate on evaluator `slot` (one caller per slot at a time), its compile already
  // submitted to farm(): the finished outcome (stages, cleaned feedback). `settings`: this
  // candidate's [eval] settings (default: the config's).
  EvalOutcome evaluate(size_t slot, const Task& task, const CandidateSource& c, std::shared_future<CompileResult> compile,
                       const EvalConfig* settings = nullptr, Clock::time_point t0 = Clock::now());
  CompileFarm& farm() { return farm_; }
  size_t slot_count() const { return slots_.size(); }
  Backend backend() const { return backend_; }

 private:
  // One candidate; infrastructure errors are retried ([sandbox] infra_retries).
  EvalOutcome evaluate_one(EvaluatorSlot& slot, const CandidateSource& c, const Task* task, size_t i,
                           std::shared_future<CompileResult>& compile, CompileResult& cr, const EvalConfig* settings);

  LeapConfig cfg_;
  Backend backend_;
  std::shared_ptr<spdlog::logger> log_;
  CompileFarm farm_;
  std::vector<std::unique_ptr<EvaluatorSlot>> slots_;
  std::map<std::string, TimingStats> reference_timings_;
  std::mutex mu_;  // reference_timings_
  bool in_order_ = false;
};

}  // namespace leap
