// Where candidates run: the one piece of the task model that the outcome vocabulary needs.
#pragma once
#include <optional>
#include <string>

namespace leap {

enum class Backend { cpu, cuda };

std::string to_string(Backend b);
std::optional<Backend> backend_from(const std::string& s);
// The model of the machine's device for the backend: the GPU's (from the driver's /proc files,
// without creating a CUDA context) or the CPU's; "unknown" if it cannot be read.
std::string device_model(Backend b);

}  // namespace leap
