#include "common/hash.h"

#include <sodium.h>

#include <cstdint>

#include "common/error.h"

namespace leap {

std::string content_hash(const std::vector<std::string_view>& parts) {
  if (sodium_init() < 0) throw LeapError("libsodium failed to initialise");
  crypto_generichash_state state;
  constexpr size_t kBytes = 32;
  crypto_generichash_init(&state, nullptr, 0, kBytes);
  for (auto part : parts) {
    uint64_t n = part.size();
    crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(&n), sizeof n);
    crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(part.data()), part.size());
  }
  unsigned char out[kBytes];
  crypto_generichash_final(&state, out, kBytes);
  static const char* hex = "0123456789abcdef";
  std::string s;
  s.reserve(2 * kBytes);
  for (unsigned char c : out) {
    s.push_back(hex[c >> 4]);
    s.push_back(hex[c & 15]);
  }
  return s;
}

}  // namespace leap
