#include "common/cores.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace leap {

std::vector<int> usable_cores() {
  std::vector<int> cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cores.push_back(c);
  if (cores.empty())
    for (int c = 0, n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); c < n; ++c)
      cores.push_back(c);
  return cores;
}

bool pin_to(const std::vector<int>& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return CPU_COUNT(&set) > 0 && ::sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace leap
