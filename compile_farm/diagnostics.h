// Turns raw compiler output into feedback a model can act on: the first errors with their
// line numbers, temp paths replaced by the candidate's name, bounded in length.
#pragma once
#include <string>

namespace leap {

std::string trim_diagnostics(const std::string& output, const std::string& temp_source,
                             const std::string& display_name, int max_lines);

}  // namespace leap
