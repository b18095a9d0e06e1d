#include "judge/pool/cpu_wait.h"

#include <algorithm>

namespace leap {

CpuWait::CpuWait(Runner& r, bool active) : runner_(r) {
  if (!active) return;
  main0_ = r.main_thread_sched();
  process0_ = r.cpu_time_us();
}

double CpuWait::waited_us() const {
  if (main0_.waiting_us < 0 || process0_ < 0) return 0;
  const SchedTimes main = runner_.main_thread_sched();
  if (main.waiting_us < 0) return 0;
  const double others_us = (runner_.cpu_time_us() - process0_) - (main.on_cpu_us - main0_.on_cpu_us);
  return std::max(main.waiting_us - main0_.waiting_us - std::max(others_us, 0.0), 0.0);
}

}  // namespace leap
