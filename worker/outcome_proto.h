// Conversions between EvalOutcome / Task and their proto/ wire forms.
#pragma once
#include "common/config.h"
#include "proto/leap.capnp.h"
#include "tasks/task.h"
#include "worker/outcome.h"

namespace leap {

void to_proto(const EvalOutcome& o, proto::TurnOutcome::Builder b);
EvalOutcome from_proto(proto::TurnOutcome::Reader r);
void to_proto(const TimingStats& t, proto::TimingStats::Builder b);
void to_proto(const EvalConfig& e, proto::EvalSettings::Builder b);
TimingStats from_proto(proto::TimingStats::Reader r);
// The task resolved for one backend (concrete shapes).
void to_proto(const Task& t, Backend backend, proto::TaskRef::Builder b);
proto::Backend to_proto(Backend b);
Backend from_proto(proto::Backend b);
DType from_proto(proto::DType d);

}  // namespace leap
