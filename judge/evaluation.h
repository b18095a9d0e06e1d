// One candidate's evaluation by the judge (leap-evald): the candidate runs in a disposable
// runner (leap-runner, sandboxed); every call gets fresh inputs and poisoned outputs, the first
// calls and a random subset of the timed ones are compared with the LibTorch reference, and the
// runner's timings are bounded by the judge's own clock. Candidate code never runs here.
#pragma once
#include <memory>
#include <string>

#include "common/outcome.h"
#include "judge/device/device.h"
#include "judge/device/gpu_lock.h"
#include "judge/device/workspace.h"
#include "judge/pool/runner_pool.h"
#include "judge/timing/timing.h"
#include "proto/leap.capnp.h"

namespace leap {

// `lock`: the device's timing lock (held shared for the evaluation, exclusively while timing).
EvalOutcome evaluate_request(proto::EvalRequest::Reader req, Device& dev, RunnerPool& runners,
                             ReferenceTimings& reference_timings, Workspace& workspace, GpuLock& lock);
// Between evaluations, once the reply is sent: waits for the used runner's exit, then lets go of
// the device's lock.
void judge_idle(RunnerPool& runners, GpuLock& lock);

}  // namespace leap
