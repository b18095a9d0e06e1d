// The LM policy's checkpoint taken now and written later: host copies of the model, its fp32
// masters and AdamW's moments, so that training may go on while they are written.
#pragma once
#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <map>
#include <memory>
#include <string>

#include "policy/policy.h"

namespace leap {

// nullptr where the copies would take more than half of the host's available memory (the caller
// saves on the step's path instead). Copies from a GPU go to pinned memory.
std::unique_ptr<PolicySnapshot> snapshot_lm(const std::map<std::string, torch::Tensor>& model,
                                            const std::map<std::string, torch::Tensor>& masters,
                                            const torch::optim::AdamW& optimizer, const std::string& from_dir);

}  // namespace leap
