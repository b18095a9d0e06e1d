// The judge's bookkeeping that a candidate must not be able to predict or dodge: which timed
// calls end up verified (a uniform sample, whatever the number of calls), and that a wrong kept
// call is caught after the fact.
#include <capnp/message.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <random>
#include <vector>

#include "judge/check/checker.h"
#include "judge/pool/runner_pool.h"
#include "judge/check/tensors.h"

namespace leap {
namespace {

// A tiny relu task: 8 float32 inputs and outputs.
class TinyRelu {
 public:
  explicit TinyRelu(int64_t n = 8) {
    auto t = msg_.initRoot<proto::TaskRef>();
    t.setName("relu");
    t.setReference("relu");
    t.setBackend(proto::Backend::CPU);
    for (auto list : {t.initInputs(1), t.initOutputs(1)}) {
      auto spec = list[0];
      spec.setName("x");
      spec.initShape(1).set(0, n);
      spec.setDtype(proto::DType::FLOAT32);
      auto d = spec.initDistribution();
      d.setKind("normal");
      d.setB(1);
    }
  }
  proto::TaskRef::Reader get() { return msg_.getRoot<proto::TaskRef>().asReader(); }

 private:
  capnp::MallocMessageBuilder msg_;
};

// A checker on the CPU for a task, with its slots in a workspace of its own.
struct Judged {
  explicit Judged(TinyRelu& task, size_t keep_capacity) : ck(task.get(), *cpu, o), ws(*cpu) {
    slots = ck.make_slots(2, ws, arena, keep_capacity);
  }
  std::unique_ptr<Device> cpu = make_cpu_device();
  EvalOutcome o;
  Checker ck;
  Workspace ws;
  std::shared_ptr<Arena> arena;
  Slots slots;
};

// Writes into a slot's outputs what an honest candidate would for `seed` (or zeros).
void answer(Checker& ck, Slots::Slot& s, uint64_t seed, bool honest) {
  ck.fill(s, seed);
  auto ref = ck.reference(s);
  s.outputs[0].copy_(honest ? ref[0] : at::zeros_like(ref[0]));
}

TEST(Reservoir, EveryTimedCallIsEquallyLikelyToBeVerified) {
  TinyRelu task;
  const size_t calls = 20, capacity = 4, trials = 2000;
  std::vector<int> kept(calls, 0);
  for (size_t trial = 0; trial < trials; ++trial) {
    Judged j(task, capacity);
    Checker& ck = j.ck;
    Slots& slots = j.slots;
    std::mt19937_64 rng(trial);
    for (uint32_t c = 0; c < calls; ++c) {
      slots[c % 2].outputs[0].fill_(static_cast<float>(c));  // marks which call a copy is of
      ck.keep(slots, slots[c % 2], c, c, rng);
    }
    ASSERT_EQ(ck.kept(), capacity);
    for (size_t k = 0; k < capacity; ++k) kept[static_cast<size_t>(slots.kept[k][0][0].item<float>())]++;
  }
  // Each call is kept with probability capacity / calls = 0.2: 400 of 2000, sd 18.
  for (size_t c = 0; c < calls; ++c) EXPECT_NEAR(kept[c], 400, 80) << "call " << c;
}

TEST(Reservoir, AWrongTimedCallIsCaughtOnceKeptAndHonestOnesPass) {
  TinyRelu task;
  for (bool honest_all : {true, false}) {
    Judged j(task, 8);
    Checker& ck = j.ck;
    Slots& slots = j.slots;
    EvalOutcome& o = j.o;
    std::mt19937_64 rng(7);
    for (uint32_t c = 0; c < 8; ++c) {  // capacity 8: every call kept
      answer(ck, slots[c % 2], 1000 + c, honest_all || c != 5);
      ck.keep(slots, slots[c % 2], 1000 + c, c, rng);
    }
    bool ok = ck.verify_kept(slots);
    EXPECT_EQ(ok, honest_all);
    if (!honest_all) {
      EXPECT_EQ(o.status, Status::cheat_detected);
      EXPECT_EQ(o.check, Check::timed_call_wrong);
      EXPECT_NE(o.feedback.find("call 5"), std::string::npos) << o.feedback;
    }
  }
}

TEST(Reservoir, AReplayedOutputIsNamedSo) {
  TinyRelu task;
  Judged j(task, 2);
  Checker& ck = j.ck;
  Slots& slots = j.slots;
  EvalOutcome& o = j.o;
  answer(ck, slots[0], 1, true);
  ASSERT_TRUE(ck.verify(slots[0], true, Check::timed_call_wrong)) << o.feedback;
  auto first = slots[0].outputs[0].clone();
  ck.fill(slots[1], 2);  // new inputs, but the outputs of the first call
  slots[1].outputs[0].copy_(first);
  EXPECT_FALSE(ck.verify(slots[1], true, Check::timed_call_wrong));
  EXPECT_EQ(o.check, Check::output_reuse) << o.feedback;
}

TEST(Workspace, TheLargestTaskSetsTheSizeAndEveryTaskReusesIt) {
  auto cpu = make_cpu_device();
  Workspace ws(*cpu);
  TinyRelu small(1000), large(100000);
  EvalOutcome o;
  std::shared_ptr<Arena> a1, a2, a3;
  Checker c_small(small.get(), *cpu, o), c_large(large.get(), *cpu, o);
  Slots s1 = c_small.make_slots(2, ws, a1, 8);
  Slots s2 = c_large.make_slots(2, ws, a2, 8);  // grows
  EXPECT_NE(a1.get(), a2.get());
  size_t grown = ws.bytes();
  Slots s3 = c_small.make_slots(2, ws, a3, 8);  // fits: nothing new
  EXPECT_EQ(a3.get(), a2.get());
  EXPECT_EQ(ws.bytes(), grown);
  // Private views never overlap: pristine inputs of both slots and every kept set are distinct.
  std::vector<std::pair<const char*, size_t>> spans;
  for (auto& slot : s2.slots) spans.emplace_back(static_cast<const char*>(slot.pristine[0].data_ptr()), slot.pristine[0].nbytes());
  for (auto& k : s2.kept) spans.emplace_back(static_cast<const char*>(k[0].data_ptr()), k[0].nbytes());
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].first + spans[i - 1].second, spans[i].first);
  EXPECT_EQ(spans.size(), 2u + 9u);
}

// A KernelBench-sized task (1.6 G float32 elements in and out, 6.4 GB each) on a GPU with
// 135 GB free: 4 slots and 8 kept sets would need about 134 GB; the judge takes what fits in
// half of the free memory, slots first to 2, then kept sets, then one slot.
TEST(Workspace, SlotsAndKeptSetsShrinkToFitTheFreeDeviceMemory) {
  auto cpu = make_cpu_device();
  TinyRelu relu(1610612736);  // shapes only: nothing is allocated
  EvalOutcome o;
  Checker ck(relu.get(), *cpu, o);
  const uint64_t t = 1610612736ull * 4;
  EXPECT_EQ(ck.bytes_for(4, 8), 4 * 3 * t + 9 * t + 5 * t);
  auto bytes = [&](size_t n, size_t k) { return ck.bytes_for(n, k); };
  const size_t gb = 1000000000;
  using Full = std::pair<size_t, size_t>;
  EXPECT_EQ(fit_slots(4, 8, 0, 0, bytes), (Full{4, 8}));  // the CPU: no bound
  EXPECT_EQ(fit_slots(4, 8, 1000 * gb, 0, bytes), (Full{4, 8}));
  auto [n, k] = fit_slots(4, 8, 135 * gb, 0, bytes);
  EXPECT_EQ(n, 1u);  // 2 slots need 2*3t + 5t at least: 71 GB of a 67.5 GB budget
  EXPECT_EQ(k, 0u);
  EXPECT_LE(1.25 * static_cast<double>(ck.bytes_for(n, k)), 0.5 * 135 * gb);
  auto half = [&](size_t n, size_t k) { return ck.bytes_for(n, k) / 2; };
  // A task half that size keeps 2 slots and 4 kept sets: (6t + 5t + 5t) / 2 = 51.5 GB (x 1.25 within 67.5).
  EXPECT_EQ(fit_slots(4, 8, 135 * gb, 0, half), (Full{2, 4}));
  // This judge's own workspace is reused, so it counts as free.
  EXPECT_EQ(fit_slots(4, 8, 10 * gb, 990 * gb, bytes), (Full{4, 8}));
}

TEST(Workspace, AQuarantinedArenaIsNeverHandedOutAgainAndStaysAllocated) {
  // A killed runner's kernel may still write into its arena: the next evaluation gets another.
  auto cpu = make_cpu_device();
  Workspace ws(*cpu);
  auto first = ws.arena(1 << 16);
  std::weak_ptr<Arena> watch = first;
  ws.quarantine();
  first.reset();  // the evaluation and the runner let go of it ...
  EXPECT_FALSE(watch.expired());  // ... yet it stays allocated: nothing else can land there
  auto second = ws.arena(1 << 16);
  EXPECT_NE(second.get(), watch.lock().get());
  EXPECT_EQ(ws.arena(1 << 16).get(), second.get());  // and the fresh one is reused as usual
}

TEST(RunnerLayout, TheLoadCommandDescribesTheSlotsTheRunnerCallsOn) {
  TinyRelu task;
  Judged j(task, 1);
  Checker& ck = j.ck;
  Slots& slots = j.slots;
  auto& arena = j.arena;
  runner::Command c = ck.load_command(slots);
  EXPECT_EQ(c.op, runner::Op::load);
  EXPECT_EQ(c.slots, 2u);
  EXPECT_EQ(c.n_in, 1u);
  EXPECT_EQ(c.n_out, 1u);
  EXPECT_GE(arena->bytes, 2 * c.slot_bytes);
  for (uint32_t i = 0; i < 2; ++i) {
    const runner::TensorDesc& d = c.tensors[i];
    EXPECT_EQ(d.ndim, 1);
    EXPECT_EQ(d.shape[0], 8);
    EXPECT_EQ(d.code, kDLFloat);
    EXPECT_EQ(d.bits, 32);
    EXPECT_LE(d.offset + 8 * sizeof(float), c.slot_bytes);
  }
  // What the runner computes from the command is where the judge's views of each slot are.
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(slots[k].inputs[0].data_ptr(), arena->base + k * c.slot_bytes + c.tensors[0].offset);
    EXPECT_EQ(slots[k].outputs[0].data_ptr(), arena->base + k * c.slot_bytes + c.tensors[1].offset);
  }
}

// The judge's observation of a call ends where the reply arrived (the kernel's stamp on it), not
// where the judge got round to reading it: a judge held up between the two (here stopped for
// 300 ms, as an idle core's wake-up or a busy machine holds it) sees no longer call.
TEST(RunnerWall, EndsWhereTheReplyArrivedNotWhereTheJudgeReadIt) {
  int sv[2], out[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_EQ(::pipe(out), 0);
  const pid_t judge = ::fork();
  ASSERT_GE(judge, 0);
  if (judge == 0) {  // the judge's side: one request to a runner that is this test
    ::close(sv[1]);
    double got[2] = {0, 0};
    {
      Runner r(ChildProcess(), sv[0], -1, -1);
      runner::Command c;
      c.op = runner::Op::calibrate;
      c.seq = 7;
      runner::Reply reply;
      const auto w = r.request(c, {}, after_seconds(20), &reply, &got[1]);
      got[0] = w == Runner::Wait::reply && reply.seq == 7 ? 1 : 0;
    }
    (void)!::write(out[1], got, sizeof got);
    ::_exit(0);
  }
  ::close(sv[0]);
  runner::Command c;
  ASSERT_EQ(::recv(sv[1], &c, sizeof c, 0), static_cast<ssize_t>(sizeof c));
  ASSERT_EQ(::kill(judge, SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(judge, &status, WUNTRACED), judge);
  ASSERT_TRUE(WIFSTOPPED(status));
  runner::Reply reply;
  reply.kind = runner::ReplyKind::called;
  reply.seq = c.seq;
  ASSERT_EQ(::send(sv[1], &reply, sizeof reply, 0), static_cast<ssize_t>(sizeof reply));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(::kill(judge, SIGCONT), 0);
  double got[2] = {0, 0};
  ASSERT_EQ(::read(out[0], got, sizeof got), static_cast<ssize_t>(sizeof got));
  ASSERT_EQ(::waitpid(judge, &status, 0), judge);
  ::close(sv[1]);
  ::close(out[0]);
  ::close(out[1]);
  EXPECT_EQ(got[0], 1) << "no reply to the request";
  EXPECT_LT(got[1], 150e3) << "the judge's own 300 ms stop was counted as the call's";
}

}  // namespace
}  // namespace leap
