#include "common/message_socket.h"

#include <capnp/serialize.h>

#include <cstring>

#include "common/error.h"

namespace leap {

MessageSocket::MessageSocket(zmq::context_t& ctx, zmq::socket_type type) : socket_(ctx, type) {
  // Queued messages still go out after close, but a peer that went away delays it at most this.
  socket_.set(zmq::sockopt::linger, 2000);
  // A send to a peer that is gone fails after this instead of blocking the role forever.
  socket_.set(zmq::sockopt::sndtimeo, 10000);
  socket_.set(zmq::sockopt::sndhwm, 100000);  // a step's outcomes queue without blocking the workers
  socket_.set(zmq::sockopt::rcvhwm, 100000);
}

std::string MessageSocket::bind(const std::string& endpoint) {
  try {
    socket_.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw LeapError("cannot bind " + endpoint + ": " + e.what());
  }
  return socket_.get(zmq::sockopt::last_endpoint);
}

void MessageSocket::connect(const std::string& endpoint) {
  try {
    socket_.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw LeapError("cannot connect to " + endpoint + ": " + e.what());
  }
}

void MessageSocket::send(capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  if (!socket_.send(zmq::const_buffer(bytes.begin(), bytes.size()), zmq::send_flags::none))
    throw LeapError("send timed out: the receiving role is gone or not reading");
}

std::optional<kj::Array<capnp::word>> MessageSocket::receive(std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, timeout) == 0) return std::nullopt;
  zmq::message_t msg;
  if (!socket_.recv(msg, zmq::recv_flags::none)) return std::nullopt;
  if (msg.size() % sizeof(capnp::word) != 0) throw LeapError("malformed message: not a whole number of words");
  auto words = kj::heapArray<capnp::word>(msg.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), msg.data(), msg.size());  // zmq frames carry no alignment promise
  return words;
}

}  // namespace leap
