#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>
#include <unistd.h>

#include <thread>

#include "common/error.h"
#include "common/framing.h"
#include "common/outcome_proto.h"
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
  // The bytes of one frame, then of a second one.
  std::string bytes;
  {
    auto [r, w] = make_pipe();
    for (int pid : {42, 43}) {
      capnp::MallocMessageBuilder msg;
      msg.initRoot<proto::EvaldHello>().setPid(pid);
      write_frame(w, msg);
    }
    ::close(w);
    char buf[4096];
    for (ssize_t n; (n = ::read(r, buf, sizeof buf)) > 0;) bytes.append(buf, static_cast<size_t>(n));
    ::close(r);
  }
  ASSERT_GT(bytes.size(), 2 * sizeof(uint64_t));
  const size_t one = bytes.size() / 2;
  // Delivered in pieces that cut the length prefix, the body, and the boundary between frames.
  const size_t cuts[] = {3, sizeof(uint64_t) + 5, one - 1, one + 4, bytes.size()};
  auto [r, w] = make_pipe();
  FrameReader reader;
  std::vector<int> pids;
  size_t sent = 0;
  for (size_t cut : cuts) {
    ASSERT_EQ(::write(w, bytes.data() + sent, cut - sent), static_cast<ssize_t>(cut - sent));
    sent = cut;
    EXPECT_TRUE(reader.read_available(r));
    while (auto frame = reader.take()) {
      capnp::FlatArrayMessageReader m(*frame);
      pids.push_back(m.getRoot<proto::EvaldHello>().getPid());
    }
    // A frame appears exactly when its last byte has arrived.
    EXPECT_EQ(pids.size(), static_cast<size_t>(sent >= 2 * one ? 2 : sent >= one ? 1 : 0)) << "after " << sent;
  }
  EXPECT_EQ(pids, (std::vector<int>{42, 43}));
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

namespace leap {
namespace {

// Every stage time crosses the wire between judge, worker and learner: a field the conversion
// forgets would arrive as 0 and vanish from the records.
TEST(OutcomeWire, EveryStageTimeSurvivesTheRoundTrip) {
  EvalOutcome o;
  o.task = "relu";
  o.compiler = "python+nvrtc";
  double* fields[] = {&o.stages.queue_wait_us,     &o.stages.compile_us,        &o.stages.load_us,
                      &o.stages.correctness_us,    &o.stages.timing_us,         &o.stages.eval_us,
                      &o.stages.total_us,          &o.stages.candidate_calls_us, &o.stages.compile_start_s,
                      &o.stages.compile_end_s,     &o.stages.eval_start_s,      &o.stages.eval_end_s,
                      &o.stages.runner_wait_us,    &o.stages.runner_start_us,   &o.stages.runner_map_us,
                      &o.stages.runner_library_us, &o.stages.kept_verify_us,    &o.stages.retired_wait_us,
                      &o.stages.gpu_lock_wait_us,  &o.stages.compile_host_us,   &o.stages.compile_device_us};
  static_assert(sizeof(StageTimes) == sizeof(fields) / sizeof(fields[0]) * sizeof(double), "a stage is missing here");
  for (size_t i = 0; i < std::size(fields); ++i) *fields[i] = 1000.0 + static_cast<double>(i);
  capnp::MallocMessageBuilder msg;
  to_proto(o, msg.initRoot<proto::TurnOutcome>());
  const EvalOutcome back = from_proto(msg.getRoot<proto::TurnOutcome>().asReader());
  const double* got = &back.stages.queue_wait_us;
  for (size_t i = 0; i < std::size(fields); ++i)
    EXPECT_EQ(*(got + (fields[i] - &o.stages.queue_wait_us)), 1000.0 + static_cast<double>(i)) << "stage " << i;
  EXPECT_EQ(back.compiler, "python+nvrtc");
}

TEST(OutcomeWire, TheCallCountsSurviveTheRoundTrip) {
  EvalOutcome o;
  o.calls = 9;
  o.verified_calls = 6;
  o.trial_calls = 2;
  o.warmup_calls = 3;
  capnp::MallocMessageBuilder msg;
  to_proto(o, msg.initRoot<proto::TurnOutcome>());
  const EvalOutcome back = from_proto(msg.getRoot<proto::TurnOutcome>().asReader());
  EXPECT_EQ(back.calls, 9u);
  EXPECT_EQ(back.verified_calls, 6u);
  EXPECT_EQ(back.trial_calls, 2u);
  EXPECT_EQ(back.warmup_calls, 3u);
}

}  // namespace
}  // namespace leap
