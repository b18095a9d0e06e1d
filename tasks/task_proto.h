// A task resolved for one backend, in its wire form (what the judge receives).
#pragma once
#include "proto/leap.capnp.h"
#include "tasks/task.h"

namespace leap {

// The task resolved for one backend (concrete shapes).
void to_proto(const Task& t, Backend backend, proto::TaskRef::Builder b);
DType from_proto(proto::DType d);

}  // namespace leap
