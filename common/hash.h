// Content hashing (BLAKE2b via libsodium) for cache keys.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace leap {

// Hex digest (32 bytes) of the parts, each length-prefixed so that ("ab","c") != ("a","bc").
std::string content_hash(const std::vector<std::string_view>& parts);

// content_hash fed in pieces: part(n) opens a part of n bytes, update() adds its bytes in any
// slices (what does not fit in memory at once: a model's weights copied out of the GPU).
class StreamHash {
 public:
  StreamHash();
  ~StreamHash();
  StreamHash(const StreamHash&) = delete;
  StreamHash& operator=(const StreamHash&) = delete;
  void part(uint64_t n);
  void update(const void* data, size_t n);
  std::string hex();  // once

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace leap
