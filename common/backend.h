// Where candidates run: the one piece of the task model that the outcome vocabulary needs.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace leap {

enum class Backend { cpu, cuda };

std::string to_string(Backend b);
std::optional<Backend> backend_from(const std::string& s);
// The model of the machine's device for the backend: the GPU's (from the driver's /proc files,
// without creating a CUDA context) or the CPU's; "unknown" if it cannot be read.
std::string device_model(Backend b);
// GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else the driver's device nodes
// (no CUDA context is created).
std::vector<std::string> visible_gpus();

}  // namespace leap
