// [eval] profile: an ok CUDA candidate's kernels measured by Nsight Compute (ncu) after its
// verdict, in a sandbox of their own (the compiler's view and the GPU's device files, no network)
// where leap-profile loads the candidate and calls it once inside the profiler's range. The
// counters are feedback for the policy and the memory, never evidence: they change no verdict and
// no timing (the candidate runs beside ncu and could write to its output).
#pragma once
#include <string>
#include <vector>

#include "common/outcome.h"
#include "proto/leap.capnp.h"

namespace leap {

// The metrics asked of ncu, one CSV row each per kernel launch.
extern const char* const kProfileMetrics;

// ncu's --csv output (rows "ID","Process ID",...,"Metric Name","Metric Unit","Metric Value";
// values may carry thousands separators) into one profile per launch, in launch order. Lines that
// are not rows (ncu's ==PROF== notes, a program's output) are skipped; a malformed row is too.
std::vector<KernelProfile> parse_ncu_csv(const std::string& text);

// What bounds a kernel, from its throughputs: latency-bound when neither memory nor the SMs reach
// 40 % of peak; memory-bound when memory throughput is at least 0.8 of the SMs'; else compute-bound.
std::string bottleneck_of(const KernelProfile& k);

// The launch that took longest (the first of equals), whose bottleneck is the profile's; nullptr
// when there is none.
const KernelProfile* longest_kernel(const std::vector<KernelProfile>& kernels);

// The profile as the policy reads it: the longest kernels first (at most `max_kernels`), one line
// each, and the bottleneck; ASCII, bounded by what it holds.
std::string profile_feedback(const std::vector<KernelProfile>& kernels, size_t max_kernels = 3);

struct ProfileResult {
  std::vector<KernelProfile> kernels;
  std::string error;  // why there is no profile ("" when there is one)
  double wall_us = 0;
};

// Runs ncu over leap-profile for `library` with the task's tensors, within `timeout_s`.
ProfileResult profile_candidate(const std::string& library, proto::TaskRef::Reader task, double timeout_s);

}  // namespace leap
