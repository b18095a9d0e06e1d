#include "common/hash.h"

#include <sodium.h>

#include <cstdint>

#include "common/error.h"

namespace leap {

struct StreamHash::State {
  crypto_generichash_state st;
};

namespace {
constexpr size_t kBytes = 32;
}

StreamHash::StreamHash() : s_(std::make_unique<State>()) {
  if (sodium_init() < 0) throw LeapError("libsodium failed to initialise");
  crypto_generichash_init(&s_->st, nullptr, 0, kBytes);
}

StreamHash::~StreamHash() = default;

void StreamHash::part(uint64_t n) { crypto_generichash_update(&s_->st, reinterpret_cast<const unsigned char*>(&n), sizeof n); }

void StreamHash::update(const void* data, size_t n) {
  crypto_generichash_update(&s_->st, static_cast<const unsigned char*>(data), n);
}

std::string StreamHash::hex() {
  unsigned char out[kBytes];
  crypto_generichash_final(&s_->st, out, kBytes);
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(2 * kBytes);
  for (unsigned char c : out) {
    s.push_back(digits[c >> 4]);
    s.push_back(digits[c & 15]);
  }
  return s;
}

std::string content_hash(const std::vector<std::string_view>& parts) {
  StreamHash h;
  for (auto part : parts) {
    h.part(part.size());
    h.update(part.data(), part.size());
  }
  return h.hex();
}

}  // namespace leap
