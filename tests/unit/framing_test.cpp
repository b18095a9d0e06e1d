#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "common/error.h"
#include "common/framing.h"
#include "common/subprocess.h"
#include "proto/leap.capnp.h"

namespace leap {
namespace {

TEST(Framing, RoundTripOverARealPipe) {
  auto [r, w] = make_pipe();
  capnp::MallocMessageBuilder msg;
  auto o = msg.initRoot<proto::TurnOutcome>();
  o.setTask("softmax");
  o.setStatus(proto::Status::CHEAT_DETECTED);
  o.setFeedback(std::string(100000, 'f'));  // larger than one pipe buffer write
  std::thread writer([&, w = w] { write_frame(w, msg); write_frame(w, msg); ::close(w); });
  for (int i = 0; i < 2; ++i) {
    auto frame = read_frame(r);
    ASSERT_TRUE(frame);
    capnp::FlatArrayMessageReader reader(*frame);
    auto got = reader.getRoot<proto::TurnOutcome>();
    EXPECT_EQ(std::string(got.getTask()), "softmax");
    EXPECT_EQ(got.getStatus(), proto::Status::CHEAT_DETECTED);
    EXPECT_EQ(got.getFeedback().size(), 100000u);
  }
  EXPECT_FALSE(read_frame(r).has_value());  // clean EOF
  writer.join();
  ::close(r);
}

TEST(Framing, IncrementalReaderAssemblesSplitFrames) {
  auto [r, w] = make_pipe();
  capnp::MallocMessageBuilder msg;
  msg.initRoot<proto::EvaldHello>().setPid(42);
  write_frame(w, msg);
  FrameReader reader;
  EXPECT_TRUE(reader.read_available(r));
  auto frame = reader.take();
  ASSERT_TRUE(frame);
  capnp::FlatArrayMessageReader m(*frame);
  EXPECT_EQ(m.getRoot<proto::EvaldHello>().getPid(), 42);
  EXPECT_FALSE(reader.take());
  ::close(w);
  EXPECT_FALSE(reader.read_available(r));
  ::close(r);
}

TEST(Framing, GarbageLengthIsRejected) {
  auto [r, w] = make_pipe();
  const char junk[] = "garbage!garbage!";
  ASSERT_EQ(::write(w, junk, 16), 16);
  FrameReader reader;
  reader.read_available(r);
  EXPECT_THROW(reader.take(), LeapError);
  ::close(r);
  ::close(w);
}

}  // namespace
}  // namespace leap

namespace leap {
namespace {

TEST(Framing, WritingToADeadPeerIsAnErrorNotASignal) {
  auto [r, w] = make_pipe();
  ::close(r);
  capnp::MallocMessageBuilder msg;
  msg.initRoot<proto::EvaldHello>().setPid(1);
  EXPECT_THROW(write_frame(w, msg), LeapError);  // without the guard SIGPIPE would end the test binary
  ::close(w);
}

}  // namespace
}  // namespace leap
