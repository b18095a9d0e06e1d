// Where candidates run: the one piece of the task model that the outcome vocabulary needs.
#pragma once
#include <optional>
#include <string>

namespace leap {

enum class Backend { cpu, cuda };

std::string to_string(Backend b);
std::optional<Backend> backend_from(const std::string& s);

}  // namespace leap
