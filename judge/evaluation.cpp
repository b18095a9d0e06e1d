#include "judge/evaluation.h"

#include "common/clock.h"
#include "common/outcome_proto.h"
#include "judge/judgement.h"

namespace leap {
namespace {

constexpr double kRetiredGoneS = 28;  // after the first 2 s: how long a killed runner may take to be gone

}  // namespace

EvalOutcome evaluate_request(proto::EvalRequest::Reader req, Device& dev, RunnerPool& pool, ReferenceTimings& cache,
                             Workspace& workspace, GpuLock& lock) {
  auto t_start = Clock::now();
  EvalOutcome o;
  o.id = req.getId();
  o.task = req.getTask().getName();
  o.candidate = req.getCandidateName();
  o.backend = from_proto(req.getTask().getBackend());
  o.status = Status::infra_error;
  // The last candidate's runner must be gone before this evaluation allocates: a runner that
  // took all device memory would otherwise fail the judge's next allocation (and the blame would
  // fall on this candidate).
  lock.shared();  // held until this candidate's runner is gone (after the reply: judge_idle)
  auto t_wait = Clock::now();
  // A runner the judge has not seen exit may still have GPU work writing into the arena: the
  // judge concludes nothing from the runner's word here, and the arena is not reused. Nothing is
  // sized or timed while it lives: past kRetiredGoneS the evaluation is leap's failure (retried by
  // a fresh judge), never a verdict measured beside a dying runner.
  if (!pool.wait_idle(2)) {
    if (dev.is_gpu()) workspace.quarantine();
    if (!pool.wait_idle(kRetiredGoneS)) {
      o.feedback = "the previous candidate's runner was still alive " +
                   std::to_string(static_cast<int>(kRetiredGoneS) + 2) + " s after it was killed (" + pool.lingering() +
                   "): this judge is replaced";
      o.recycle_evaluator = true;
      lock.release();
      return o;
    }
  }
  o.stages.retired_wait_us = micros_since(t_wait);
  {
    Judgement j(req, dev, pool, cache, workspace, lock, o);
    j.run();
  }
  o.stages.gpu_lock_wait_us = lock.take_waited_us();
  o.stages.eval_us = micros_since(t_start);
  return o;
}

void judge_idle(RunnerPool& pool, GpuLock& lock) {
  // The retired runner's teardown is GPU work too: judges sharing the device time only once it is
  // over, so this judge's hold lasts as long as the teardown (when this wait stopped at 2 s,
  // another judge could time beside a slow one). The next evaluation could not start before it
  // anyway; a runner that will not die is that evaluation's failure.
  pool.wait_idle(2 + kRetiredGoneS);
  pool.top_up();  // a batch of spares once few are left (the CPU's: the one just used)
  lock.release();
}

}  // namespace leap
