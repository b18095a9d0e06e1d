// One candidate's evaluation inside leap-evald: load, correctness trials with the
// anti-hacking checks, pointer-cache probe, adaptive timing against the LibTorch reference.
// Runs untrusted code: only ever called inside the sandboxed evaluator process.
#pragma once
#include <map>
#include <string>

#include "proto/leap.capnp.h"
#include "worker/outcome.h"

namespace leap {

// Reference timings measured by this process, by task name.
using ReferenceTimings = std::map<std::string, TimingStats>;

EvalOutcome evaluate_request(proto::EvalRequest::Reader req, ReferenceTimings& reference_timings);

}  // namespace leap
