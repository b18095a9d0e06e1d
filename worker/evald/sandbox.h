// Confinement of the evaluator process: resource limits and a seccomp filter that denies
// process creation, sockets, signals to others and writable opens. Installed once at
// start-up, after LibTorch is initialised; applies to every candidate loaded afterwards.
#pragma once
#include <cstdint>

namespace leap {

struct SandboxLimits {
  double cpu_limit_s = 3600;
  uint64_t memory_mb = 4096;
  uint64_t file_size_bytes = 0;
};

// Throws LeapError if a limit cannot be set.
void apply_limits(const SandboxLimits& limits);
// Throws LeapError if the filter cannot be installed.
void install_seccomp_filter();

}  // namespace leap
