// Real ZeroMQ sockets (inproc, ipc, tcp on loopback) carrying proto/ messages.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <thread>

#include "common/error.h"
#include "common/message_socket.h"
#include "proto/leap.capnp.h"

namespace leap {
namespace {

void send_outcome(MessageSocket& s, uint64_t id, const std::string& feedback) {
  capnp::MallocMessageBuilder msg;
  auto o = msg.initRoot<proto::TurnOutcome>();
  o.setId(id);
  o.setStatus(proto::Status::WRONG_ANSWER);
  o.setFeedback(feedback);
  s.send(msg);
}

class Transports : public ::testing::TestWithParam<std::string> {};

TEST_P(Transports, ManyWorkersPushOutcomesToOneLearner) {
  zmq::context_t ctx;
  MessageSocket learner(ctx, zmq::socket_type::pull);
  std::string endpoint = learner.bind(GetParam());
  EXPECT_EQ(endpoint.find('*'), std::string::npos) << endpoint;
  constexpr int kWorkers = 4, kEach = 50;
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w)
    workers.emplace_back([&, w] {
      MessageSocket push(ctx, zmq::socket_type::push);
      push.connect(endpoint);
      for (int i = 0; i < kEach; ++i) send_outcome(push, static_cast<uint64_t>(w * 1000 + i), std::string(w * 100, 'x'));
    });
  std::set<uint64_t> seen;
  for (int n = 0; n < kWorkers * kEach; ++n) {
    auto frame = learner.receive(std::chrono::milliseconds(5000));
    ASSERT_TRUE(frame) << "message " << n << " never arrived";
    capnp::FlatArrayMessageReader reader(*frame);
    auto o = reader.getRoot<proto::TurnOutcome>();
    EXPECT_EQ(o.getStatus(), proto::Status::WRONG_ANSWER);
    EXPECT_EQ(o.getFeedback().size(), (o.getId() / 1000) * 100);
    EXPECT_TRUE(seen.insert(o.getId()).second) << "duplicate " << o.getId();
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(seen.size(), static_cast<size_t>(kWorkers * kEach));
  EXPECT_FALSE(learner.receive(std::chrono::milliseconds(50)));  // nothing more
}

INSTANTIATE_TEST_SUITE_P(All, Transports,
                         ::testing::Values("inproc://outcomes", "ipc:///tmp/leap-test-" + std::to_string(::getpid()),
                                           "tcp://127.0.0.1:*"));

TEST(MessageSocket, ReceiveTimesOutAndRejectsTornFrames) {
  zmq::context_t ctx;
  MessageSocket pull(ctx, zmq::socket_type::pull);
  auto ep = pull.bind("tcp://127.0.0.1:*");
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(pull.receive(std::chrono::milliseconds(100)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(90));
  zmq::socket_t raw(ctx, zmq::socket_type::push);
  raw.connect(ep);
  raw.send(zmq::str_buffer("12345"), zmq::send_flags::none);  // not whole words
  EXPECT_THROW(pull.receive(std::chrono::milliseconds(2000)), LeapError);
}

TEST(MessageSocket, BindErrorsAreClear) {
  zmq::context_t ctx;
  MessageSocket a(ctx, zmq::socket_type::pull);
  auto ep = a.bind("tcp://127.0.0.1:*");
  MessageSocket b(ctx, zmq::socket_type::pull);
  try {
    b.bind(ep);
    FAIL() << "second bind accepted";
  } catch (const LeapError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot bind " + ep), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace leap
