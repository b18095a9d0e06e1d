// The runner's allow-list seccomp filter, built from the sandbox policy's [runner.syscalls]
// (sandbox/policy.toml). Installed after the backend is initialised and the judge's buffers are
// mapped, before the candidate is loaded. Lives in leap-runner (no LibTorch, no logging library).
#pragma once
#include <string>
#include <vector>

#include "sandbox/policy.h"

namespace leap::sandbox {

// `cuda`: also what the CUDA driver needs while kernels run (ioctl, poll, its own threads).
// `debug`: a forbidden call reports its number on stderr (SIGSYS) instead of failing quietly,
// to find what a driver needs; never for production runs. Exits the process (code 3) when the
// filter cannot be built.
void install_candidate_filter(const Policy& p, bool cuda, bool debug);
// The system calls the policy names that this machine's libseccomp does not know (a typo in
// the policy, or a call of another architecture).
std::vector<std::string> unknown_calls(const Policy& p);

}  // namespace leap::sandbox
