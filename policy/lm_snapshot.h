// The LM policy's checkpoint taken now and written later: host copies of the model, its fp32
// masters and AdamW's moments, so that training may go on while they are written.
#pragma once
#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "policy/policy.h"

namespace leap {

// Host memory for the copies, one tensor each, kept by the policy between snapshots: allocating
// (from a GPU, pinning) gigabytes anew each time costs about as much as the copy itself. A
// snapshot holds it until written; one taken meanwhile gets memory of its own.
using SnapshotArena = std::shared_ptr<std::vector<torch::Tensor>>;

// nullptr where the copies need more new memory than the host has available beyond a reserve for
// training (a quarter of its memory, at least 2 GiB): the caller saves on the step's path instead.
// From a GPU the copies are pinned.
std::unique_ptr<PolicySnapshot> snapshot_lm(const std::map<std::string, torch::Tensor>& model,
                                            const std::map<std::string, torch::Tensor>& masters,
                                            const torch::optim::AdamW& optimizer, const std::string& from_dir,
                                            SnapshotArena& arena);

}  // namespace leap
