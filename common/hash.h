// Content hashing (BLAKE2b via libsodium) for cache keys.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace leap {

// Hex digest (32 bytes) of the parts, each length-prefixed so that ("ab","c") != ("a","bc").
std::string content_hash(const std::vector<std::string_view>& parts);

}  // namespace leap
