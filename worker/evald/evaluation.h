// One candidate's evaluation inside leap-evald: load, correctness trials with the
// anti-hacking checks, pointer-cache probe, timing against the LibTorch reference, and on the
// GPU the replay and stream-escape checks. Runs untrusted code: only ever called inside the
// sandboxed evaluator process.
#pragma once
#include <map>
#include <string>

#include "proto/leap.capnp.h"
#include "worker/evald/device.h"
#include "worker/outcome.h"

namespace leap {

// Reference timings measured by this process, by task and device model.
using ReferenceTimings = std::map<std::string, TimingStats>;

EvalOutcome evaluate_request(proto::EvalRequest::Reader req, Device& dev, ReferenceTimings& reference_timings);

}  // namespace leap
