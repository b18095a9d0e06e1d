// A runner's wait for a CPU over a call, from the kernel's scheduler account.
#pragma once
#include "judge/pool/runner.h"
#include "judge/timing/timing.h"

namespace leap {

// How long a runner's main thread waited for a CPU since construction, less the CPU time the
// runner's other threads ran meanwhile: a wait its own threads may have caused is not the
// machine's load (a candidate could starve its main thread with a thread of its own while work
// escapes). 0 where the kernel keeps no account, or when inactive.
class CpuWait {
 public:
  CpuWait(Runner& r, bool active);
  double waited_us() const;

 private:
  Runner& runner_;
  SchedTimes main0_;
  double process0_ = -1;
};

}  // namespace leap
