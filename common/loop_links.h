// The loop's transport as a role sees it: its own inbox (a bound ZeroMQ PULL socket) and a
// PUSH socket to any other rank's inbox, all carrying proto/ LoopMessage. The same code runs
// over tcp between MPI ranks and over inproc between threads (tests).
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/message_socket.h"

namespace leap {

class LoopLinks {
 public:
  // `inbox` is bound already; `endpoints[r]` is rank r's inbox.
  LoopLinks(zmq::context_t& ctx, int rank, std::unique_ptr<MessageSocket> inbox, std::vector<std::string> endpoints);
  int rank() const { return rank_; }
  int world() const { return static_cast<int>(endpoints_.size()); }
  MessageSocket& inbox() { return *inbox_; }
  void send(int to_rank, capnp::MessageBuilder& m);

 private:
  zmq::context_t& ctx_;
  int rank_;
  std::unique_ptr<MessageSocket> inbox_;
  std::vector<std::string> endpoints_;
  std::map<int, std::unique_ptr<MessageSocket>> out_;
};

// Set by SIGTERM / SIGINT (the launcher stopping the job); role loops poll it.
std::atomic<bool>& stop_requested();
void install_stop_handlers();

}  // namespace leap
