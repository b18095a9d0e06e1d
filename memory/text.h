// Text helpers shared by the memory's store (memory.cpp) and its context builder (context.cpp).
#pragma once
#include <cctype>
#include <sstream>
#include <string>

#include "memory/memory.h"

namespace leap::memory::detail {

inline std::string first_line(const std::string& s, size_t max = 160) {
  auto line = s.substr(0, s.find('\n'));
  if (line.size() > max) line = line.substr(0, max) + "...";
  return line;
}

// A failure pattern: the status and the feedback's first line.
inline std::string pattern_of(const Case& c) { return status_text(c) + ": " + first_line(c.feedback, 120); }

inline std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

inline std::string fmt_speedup(double x) {
  std::ostringstream o;
  o.precision(3);
  o << x << "x";
  return o.str();
}

}  // namespace leap::memory::detail
