#include "common/text.h"

namespace leap {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 (RFC 3629: no overlongs, surrogates or > U+10FFFF).
size_t valid_sequence(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(k) & 0xC0) != 0x80) return 0;
  if (c == 0xE0 && b(1) < 0xA0) return 0;
  if (c == 0xED && b(1) > 0x9F) return 0;
  if (c == 0xF0 && b(1) < 0x90) return 0;
  if (c == 0xF4 && b(1) > 0x8F) return 0;
  return n;
}

}  // namespace

std::string clean_text(std::string_view s, size_t max_bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(std::min(s.size(), max_bytes));
  size_t i = 0;
  for (; i < s.size(); ) {
    size_t n = valid_sequence(s, i);
    size_t add = n ? n : kReplacement.size();
    if (out.size() + add > max_bytes) break;
    if (n) out.append(s.substr(i, n));
    else out.append(kReplacement);
    i += n ? n : 1;
  }
  if (i < s.size()) {
    std::string note = "\n[... " + std::to_string(s.size() - i) + " more bytes cut]";
    while (!out.empty() && out.size() + note.size() > max_bytes) {
      out.pop_back();
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
      if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
    }
    out += note;
  }
  return out;
}

}  // namespace leap
