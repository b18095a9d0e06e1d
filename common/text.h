// Text from outside leap (compiler diagnostics, candidate messages) made safe to store and
// show: valid UTF-8 (each invalid byte becomes U+FFFD) and bounded, cut on a character boundary.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace leap {

std::string clean_text(std::string_view s, size_t max_bytes);

}  // namespace leap
