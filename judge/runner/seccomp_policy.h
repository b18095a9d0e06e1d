// The allow-list seccomp filter of a runner, installed after the backend is initialised and
// the judge's buffers are mapped, before the candidate is loaded. Anything not listed fails
// with EPERM. Lives in leap-runner only (no LibTorch, no logging library).
#pragma once

namespace leap::runner {

// `cuda`: also what the CUDA driver needs while kernels run (ioctl, poll, its own threads).
// `debug`: a forbidden call reports its number on stderr (SIGSYS) instead of failing quietly,
// to find what a driver needs; never for production runs.
void install_candidate_filter(bool cuda, bool debug);

}  // namespace leap::runner
