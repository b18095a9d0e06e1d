// The CPUs this process may run on (its affinity mask, which taskset, Slurm's cgroups and
// `leap bench dcp --jobs` narrow): what "one per core" counts and where a judge pins itself.
#pragma once
#include <vector>

namespace leap {

// CPU numbers in the calling thread's affinity mask, ascending; never empty (all the machine's
// cores where the mask cannot be read).
std::vector<int> usable_cores();

// Restricts the calling thread (and what it starts afterwards) to `cores`; false if refused.
bool pin_to(const std::vector<int>& cores);

}  // namespace leap
