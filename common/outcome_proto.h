// Conversions between the outcome vocabulary (EvalOutcome, timings, settings) and proto/.
#pragma once
#include "common/backend.h"
#include "common/config.h"
#include "common/outcome.h"
#include "proto/leap.capnp.h"

namespace leap {

void to_proto(const EvalOutcome& o, proto::TurnOutcome::Builder b);
EvalOutcome from_proto(proto::TurnOutcome::Reader r);
void to_proto(const TimingStats& t, proto::TimingStats::Builder b);
// [eval]'s settings on the wire ([sandbox]'s deadline and memory limit are the sender's to add).
void to_proto(const EvalConfig& e, proto::EvalSettings::Builder b);
EvalConfig from_proto(proto::EvalSettings::Reader s);
TimingStats from_proto(proto::TimingStats::Reader r);
proto::Backend to_proto(Backend b);
proto::Status to_proto(Status s);
Status from_proto(proto::Status s);
proto::Check to_proto(Check c);
Check from_proto(proto::Check c);
Backend from_proto(proto::Backend b);

}  // namespace leap
