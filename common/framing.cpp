#include "common/framing.h"

#include <capnp/serialize.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace leap {
namespace {

// Blocks SIGPIPE for the calling thread while it writes, so a dead peer is an EPIPE error
// and never a signal that kills the caller; a SIGPIPE raised meanwhile is consumed.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old_);
  }
  ~NoSigpipe() {
    sigset_t pipe_only, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE)) {
      timespec zero{0, 0};
      while (sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t old_;
};

void write_all(int fd, const void* data, size_t n) {
  NoSigpipe guard;
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_errno("write to peer");
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Returns bytes read; 0 on EOF.
size_t read_all(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno("read from peer");
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

kj::Array<capnp::word> words_from(const unsigned char* bytes, uint64_t n) {
  auto words = kj::heapArray<capnp::word>(n / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes, n);
  return words;
}

}  // namespace

void throw_errno(const std::string& what) {
  throw LeapError(what + ": " + std::strerror(errno));
}

void write_frame(int fd, capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  uint64_t n = bytes.size();
  write_all(fd, &n, sizeof n);
  write_all(fd, bytes.begin(), bytes.size());
}

std::optional<kj::Array<capnp::word>> read_frame(int fd) {
  uint64_t n = 0;
  size_t got = read_all(fd, &n, sizeof n);
  if (got == 0) return std::nullopt;
  if (got != sizeof n) throw LeapError("peer closed inside a frame header");
  if (n % sizeof(capnp::word) != 0 || n > (256u << 20)) throw LeapError("malformed frame length");
  auto words = kj::heapArray<capnp::word>(n / sizeof(capnp::word));
  if (read_all(fd, words.begin(), n) != n) throw LeapError("peer closed inside a frame");
  return words;
}

bool FrameReader::read_available(int fd) {
  unsigned char chunk[65536];
  ssize_t r = ::read(fd, chunk, sizeof chunk);
  if (r < 0) return errno == EINTR || errno == EAGAIN;
  if (r == 0) return false;
  buf_.insert(buf_.end(), chunk, chunk + r);
  return true;
}

std::optional<kj::Array<capnp::word>> FrameReader::take() {
  if (buf_.size() < sizeof(uint64_t)) return std::nullopt;
  uint64_t n = 0;
  std::memcpy(&n, buf_.data(), sizeof n);
  if (n % sizeof(capnp::word) != 0 || n > max_bytes_) throw LeapError("malformed frame length from peer");
  if (buf_.size() < sizeof n + n) return std::nullopt;
  auto words = words_from(buf_.data() + sizeof n, n);
  buf_.erase(buf_.begin(), buf_.begin() + static_cast<long>(sizeof n + n));
  return words;
}

}  // namespace leap
