// ZeroMQ sockets that carry Cap'n Proto messages, one message per frame (the streams of the
// loop: turn outcomes worker -> learner, decisions learner -> coordinator). Received frames
// are copied into word-aligned buffers before capnp reads them.
#pragma once
#include <capnp/message.h>
#include <kj/array.h>

#include <chrono>
#include <optional>
#include <string>
#include <zmq.hpp>

namespace leap {

class MessageSocket {
 public:
  MessageSocket(zmq::context_t& ctx, zmq::socket_type type);
  // Binds and returns the endpoint actually bound ("tcp://127.0.0.2:*" gets its port).
  std::string bind(const std::string& endpoint);
  void connect(const std::string& endpoint);
  void send(capnp::MessageBuilder& message);
  // nullopt when nothing arrived within `timeout`.
  std::optional<kj::Array<capnp::word>> receive(std::chrono::milliseconds timeout);
  zmq::socket_t& raw() { return socket_; }

 private:
  zmq::socket_t socket_;
};

}  // namespace leap
