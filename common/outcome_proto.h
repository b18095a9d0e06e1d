// Conversions between the outcome vocabulary (EvalOutcome, timings, settings) and proto/.
#pragma once
#include "common/config.h"
#include "proto/leap.capnp.h"
#include "common/backend.h"
#include "common/outcome.h"

namespace leap {

void to_proto(const EvalOutcome& o, proto::TurnOutcome::Builder b);
EvalOutcome from_proto(proto::TurnOutcome::Reader r);
void to_proto(const TimingStats& t, proto::TimingStats::Builder b);
void to_proto(const EvalConfig& e, proto::EvalSettings::Builder b);
TimingStats from_proto(proto::TimingStats::Reader r);
proto::Backend to_proto(Backend b);
Backend from_proto(proto::Backend b);

}  // namespace leap
