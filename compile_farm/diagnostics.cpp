#include "compile_farm/diagnostics.h"

#include <sstream>
#include <vector>

namespace leap {
namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

}  // namespace

std::string trim_diagnostics(const std::string& output, const std::string& temp_source,
                             const std::string& display_name, int max_lines) {
  std::string text = output;
  replace_all(text, temp_source, display_name);
  // The linker names the bare file.
  auto slash = temp_source.find_last_of('/');
  if (slash != std::string::npos) replace_all(text, temp_source.substr(slash + 1) + ":", display_name + ":");
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  // Start at the first error; what precedes it (warnings, "In function") is context noise.
  size_t start = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& l = lines[i];
    if (l.find("error") != std::string::npos || l.find("undefined reference") != std::string::npos) {
      bool context = i > 0 && (lines[i - 1].find("In function") != std::string::npos ||
                               lines[i - 1].find("in function") != std::string::npos);
      start = context ? i - 1 : i;
      break;
    }
  }
  std::ostringstream out;
  int kept = 0;
  for (size_t i = start; i < lines.size() && kept < max_lines; ++i, ++kept) out << lines[i] << '\n';
  size_t rest = lines.size() - start - static_cast<size_t>(kept);
  if (rest > 0) out << "... (" << rest << " more lines)\n";
  return out.str();
}

}  // namespace leap
