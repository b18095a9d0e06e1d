#include "support/inproc_ranks.h"

#include <atomic>
#include <stdexcept>

namespace leap::test {

InprocRanks::InprocRanks(int world) {
  static std::atomic<int> next_id{0};
  const int id = next_id++;
  std::vector<std::unique_ptr<MessageSocket>> inboxes;
  std::vector<std::string> endpoints;
  for (int r = 0; r < world; ++r) {  // every inbox bound before any rank connects
    inboxes.push_back(std::make_unique<MessageSocket>(ctx_, zmq::socket_type::pull));
    endpoints.push_back(inboxes.back()->bind("inproc://leap-test-ranks-" + std::to_string(id) + "-" + std::to_string(r)));
  }
  for (int r = 0; r < world; ++r)
    links_.push_back(std::make_unique<LoopLinks>(ctx_, r, std::move(inboxes[static_cast<size_t>(r)]), endpoints));
}

kj::Array<capnp::word> InprocRanks::receive(int rank, std::chrono::milliseconds wait) {
  auto words = links(rank).inbox().receive(wait);
  if (!words) throw std::runtime_error("rank " + std::to_string(rank) + " received nothing within the wait");
  return std::move(*words);
}

}  // namespace leap::test
