// A worker's handle on one sandboxed evaluator slot: a warm leap-evald process plus
// pre-started spares. Sends a request, enforces the wall-clock deadline, turns crashes
// and hangs into outcomes, and swaps in a spare so the next candidate is unaffected.
// Never loads candidate code itself.
#pragma once
#include <deque>
#include <memory>
#include <string>

#include <spdlog/logger.h>

#include "common/config.h"
#include "common/framing.h"
#include "common/outcome.h"
#include "common/subprocess.h"
#include "tasks/task.h"

namespace leap {

struct EvalJob {
  uint64_t id = 0;
  const Task* task = nullptr;
  std::string candidate;
  std::string library_path;
  const TimingStats* reference_timing = nullptr;  // known from an earlier evaluation
  const EvalConfig* settings = nullptr;           // this job's [eval] settings (default: the slot's)
  CandidateFormat format = CandidateFormat::leap_abi;
};

class EvaluatorSlot {
 public:
  // `device`: the GPU ordinal of this slot on the CUDA backend.
  EvaluatorSlot(std::string evald_path, Backend backend, SandboxConfig sandbox, EvalConfig eval,
                std::shared_ptr<spdlog::logger> log, int device = 0);
  ~EvaluatorSlot();
  EvaluatorSlot(const EvaluatorSlot&) = delete;
  EvaluatorSlot& operator=(const EvaluatorSlot&) = delete;

  // Blocking; always returns an outcome (infra_error when the evaluator itself fails).
  EvalOutcome evaluate(const EvalJob& job);
  int restarts() const { return restarts_; }
  int pid() const;  // of the current evaluator, -1 if none
  // Waits for the current evaluator's start (its hello: device, LibTorch and spare runners up);
  // false with `why` when it failed to start.
  bool ready(std::string* why) { return ensure_ready(why); }

 private:
  struct Process;
  std::unique_ptr<Process> spawn();
  bool ensure_ready(std::string* why);
  void retire_current();

  std::string evald_path_;
  Backend backend_;
  SandboxConfig sandbox_;
  EvalConfig eval_;
  std::shared_ptr<spdlog::logger> log_;
  Launcher launcher_;  // evaluators die with it (PR_SET_PDEATHSIG), never with a caller's thread
  std::unique_ptr<Process> current_;
  std::deque<std::unique_ptr<Process>> spares_;
  int restarts_ = 0;
  int device_ = 0;
};

}  // namespace leap
