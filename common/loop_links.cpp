#include "common/loop_links.h"

#include <csignal>

namespace leap {

LoopLinks::LoopLinks(zmq::context_t& ctx, int rank, std::unique_ptr<MessageSocket> inbox,
                     std::vector<std::string> endpoints)
    : ctx_(ctx), rank_(rank), inbox_(std::move(inbox)), endpoints_(std::move(endpoints)) {}

void LoopLinks::send(int to_rank, capnp::MessageBuilder& m) {
  auto& s = out_[to_rank];
  if (!s) {
    s = std::make_unique<MessageSocket>(ctx_, zmq::socket_type::push);
    s->connect(endpoints_.at(static_cast<size_t>(to_rank)));
  }
  s->send(m);
}

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {
extern "C" void on_stop_signal(int) { stop_requested().store(true); }
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

}  // namespace leap
