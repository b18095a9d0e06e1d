// Ranks of the loop as links of one process over inproc ZeroMQ sockets (as Gloo's base_test runs
// ranks as threads): a role under test gets its rank's links; the test plays the other ranks
// with theirs, sending and receiving LoopMessages as those roles would.
#pragma once
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/loop_links.h"
#include "proto/leap.capnp.h"

namespace leap::test {

class InprocRanks {
 public:
  explicit InprocRanks(int world);
  LoopLinks& links(int rank) { return *links_.at(static_cast<size_t>(rank)); }
  // The next message to `rank` (its words; read it with `reader`), or throws after `wait`.
  kj::Array<capnp::word> receive(int rank, std::chrono::milliseconds wait = std::chrono::seconds(30));

 private:
  zmq::context_t ctx_;
  std::vector<std::unique_ptr<LoopLinks>> links_;
};

// A LoopMessage's reader over received words (kept alive by the caller).
inline proto::LoopMessage::Reader reader_of(capnp::FlatArrayMessageReader& r) { return r.getRoot<proto::LoopMessage>(); }

}  // namespace leap::test
