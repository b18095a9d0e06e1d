// LibTorch reference implementations of the built-in tasks, looked up by the id that
// task.toml names. Linked only into leap-evald (and tests): LibTorch stays out of the ranks.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

namespace leap {

using Params = std::vector<std::pair<std::string, double>>;
using ReferenceFn = std::vector<at::Tensor> (*)(const std::vector<at::Tensor>& inputs, const Params& params);

// nullptr when the id is unknown.
ReferenceFn find_reference(const std::string& id);
std::vector<std::string> reference_ids();

}  // namespace leap
