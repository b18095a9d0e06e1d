// Length-prefixed Cap'n Proto frames over pipes and sockets.
// A frame is a uint64 byte count followed by the message as a flat word array; readers
// copy bytes into word-aligned buffers before handing them to capnp.
#pragma once
#include <capnp/message.h>
#include <kj/array.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace leap {

// Writes one frame; throws LeapError on a write error (EPIPE included).
void write_frame(int fd, capnp::MessageBuilder& message);

// Blocking read of one frame; nullopt on clean EOF before the first byte.
std::optional<kj::Array<capnp::word>> read_frame(int fd);

// Incremental reader for a non-blocking or poll()-driven fd.
class FrameReader {
 public:
  explicit FrameReader(uint64_t max_frame_bytes = 64u << 20) : max_bytes_(max_frame_bytes) {}
  // Reads what is available; returns false on EOF or a read error.
  bool read_available(int fd);
  // A complete frame, if one has arrived. Throws LeapError on an oversized or misaligned frame.
  std::optional<kj::Array<capnp::word>> take();

 private:
  std::vector<unsigned char> buf_;
  uint64_t max_bytes_;
};

}  // namespace leap
