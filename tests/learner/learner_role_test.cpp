// The learner role alone: the test plays the coordinator (rank 0), sending the step's opening and
// the workers' results over inproc links, and checks the learner's DCP decisions, its step result,
// its outcomes.jsonl and its part of the weight broadcast. The replay policy trains nothing: what
// is under test is the learner's bookkeeping, not an update.
#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <set>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/outcome_proto.h"
#include "learner/learner_role.h"
#include "learner/settings.h"
#include "support/inproc_ranks.h"
#include "support/test_util.h"

namespace leap {
namespace {

constexpr int kCoordinator = 0, kLearner = 1;

class LearnerAlone : public ::testing::Test {
 protected:
  LearnerAlone() : ranks_(2), channel_(1) {
    LearnerConfig l;  // G = 4, T = 2; DCP's defaults: >= 50% failing refined, all-failed pruned
    l.group_size = 4;
    l.max_turns = 2;
    s_.dcp = dcp_config(l);
    s_.reward = reward_config(l);
    s_.run_dir = dir_.path();
    PolicyConfig pc;
    pc.kind = "replay";
    pc.candidates = test::source_dir() + "/examples/cpu";
    policy_ = make_policy(pc, 1);
  }
  ~LearnerAlone() override {
    if (thread_.joinable()) thread_.join();
  }
  void start() {
    thread_ = std::thread([this] {
      auto log = std::make_shared<spdlog::logger>("learner-test", std::make_shared<spdlog::sinks::null_sink_mt>());
      try {
        LearnerRole l(ranks_.links(kLearner), channel_, *policy_, s_, log);
        l.run();
      } catch (...) {
        error_ = std::current_exception();
      }
    });
  }
  void send(capnp::MallocMessageBuilder& m) { ranks_.links(kCoordinator).send(kLearner, m); }
  void open_step(std::vector<uint64_t> groups) {
    capnp::MallocMessageBuilder m;
    auto so = m.initRoot<proto::LoopMessage>().initStepOpen();
    so.setStep(step_);
    auto gs = so.initGroups(static_cast<unsigned>(groups.size()));
    for (unsigned i = 0; i < groups.size(); ++i) {
      gs[i].setGroup(groups[i]);
      gs[i].setTask("relu");
    }
    send(m);
  }
  void result(uint64_t group, uint32_t rollout, uint32_t turn, Status status, Check check = Check::none,
              const std::string& feedback = "") {
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<proto::LoopMessage>().initResult();
    r.setStep(step_);
    r.setGroup(group);
    r.setRollout(rollout);
    r.setTurn(turn);
    r.setWorker(2);
    EvalOutcome o = failed_outcome("relu", "relu.cpp", Backend::cpu, status, feedback);
    o.check = check;
    if (status == Status::ok) o.speedup = 1.5;
    to_proto(o, r.initOutcome());
    auto acts = r.initGeneration().initActions(1);
    acts.set(0, static_cast<int32_t>(10 * turn + rollout));
    send(m);
  }
  kj::Array<capnp::word> next() { return ranks_.receive(kCoordinator); }
  std::string error() {
    if (!error_) return "";
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  // Step step_ with one group whose four rollouts all pass at turn 1 (easy: final), to its result.
  void easy_step(uint64_t group) {
    open_step({group});
    for (uint32_t r = 0; r < 4; ++r) result(group, r, 1, Status::ok);
    for (bool collected : {true, false}) {
      auto words = next();
      capnp::FlatArrayMessageReader rd(words);
      auto msg = test::reader_of(rd);
      ASSERT_EQ(collected ? msg.isStepCollected() : msg.isStepResult(), true) << "step " << step_;
      if (!collected) {
        EXPECT_EQ(msg.getStepResult().getStep(), step_);
      }
    }
  }
  // The coordinator's Sync of `version` (a checkpoint folder or ""), answered by the learner's Synced.
  void sync(uint64_t version, const std::string& checkpoint_dir) {
    capnp::MallocMessageBuilder m;
    auto sy = m.initRoot<proto::LoopMessage>().initSync();
    sy.setStep(step_);
    sy.setWeightsVersion(version);
    sy.setCheckpointDir(checkpoint_dir);
    send(m);
    auto words = next();
    capnp::FlatArrayMessageReader rd(words);
    ASSERT_TRUE(test::reader_of(rd).isSynced());
    EXPECT_EQ(test::reader_of(rd).getSynced().getWeightsVersion(), version);
    EXPECT_EQ(test::reader_of(rd).getSynced().getRank(), static_cast<uint32_t>(kLearner));
  }
  void stop() {
    capnp::MallocMessageBuilder m;
    m.initRoot<proto::LoopMessage>().initStop().setReason("test");
    send(m);
  }

  test::TempDir dir_;
  test::InprocRanks ranks_;
  InProcessWeightChannel channel_;
  LearnerSettings s_;
  std::unique_ptr<Policy> policy_;
  std::thread thread_;
  std::exception_ptr error_;
  uint32_t step_ = 0;  // the step the helpers speak of
};

// The replay policy with checkpoint writes held until the test lets them go (then failing where
// it says so): what the learner does while a checkpoint is being written.
class HeldWrites : public Policy {
 public:
  explicit HeldWrites(std::unique_ptr<Policy> inner) : inner_(std::move(inner)) {}
  std::string kind() const override { return inner_->kind(); }
  Generation generate(const Task& t, Backend b, const PolicyContext& c, uint64_t seed) override {
    return inner_->generate(t, b, c, seed);
  }
  TrainStats train(const std::vector<TrainSample>& batch) override { return inner_->train(batch); }
  std::vector<float> weights() const override { return inner_->weights(); }
  void set_weights(const std::vector<float>& w) override { inner_->set_weights(w); }
  void save(const std::string& dir) const override { inner_->save(dir); }
  void load(const std::string& dir) override { inner_->load(dir); }
  bool can_write(const Task& t, Backend b) const override { return inner_->can_write(t, b); }
  std::unique_ptr<PolicySnapshot> snapshot() const override {
    struct Held : PolicySnapshot {
      std::shared_future<void> go;
      bool fail = false;
      void write(const std::string& dir) const override {
        go.wait();
        if (fail) throw std::runtime_error("No space left on device");
        std::filesystem::create_directories(dir);
        std::ofstream(dir + "/policy.bin") << "the snapshot";
      }
    };
    auto h = std::make_unique<Held>();
    h->go = go;
    h->fail = fail;
    return h;
  }
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  bool fail = false;

 private:
  std::unique_ptr<Policy> inner_;
};

TEST_F(LearnerAlone, DecidesByDcpCarriesTheVerdictTypedAndReportsTheStep) {
  start();
  open_step({10, 11});
  // Group 10: two of four fail at turn 1 (medium): refined. Group 11: every rollout fails
  // (hopeless): pruned, no decision.
  const std::string long_feedback(5000, 'f');  // the learner passes feedback on uncut
  result(10, 0, 1, Status::ok);
  result(10, 1, 1, Status::timeout, Check::too_slow, "call 3 took 9.1 ms");
  result(10, 2, 1, Status::wrong_answer, Check::none, long_feedback);
  result(10, 3, 1, Status::ok);
  for (uint32_t r = 0; r < 4; ++r) result(11, r, 1, Status::compile_error);

  auto words = next();
  capnp::FlatArrayMessageReader rd(words);
  auto msg = test::reader_of(rd);
  ASSERT_TRUE(msg.isDecision());
  auto d = msg.getDecision();
  EXPECT_EQ(d.getGroup(), 10u);
  EXPECT_EQ(d.getTurn(), 2u);
  EXPECT_EQ(std::string(d.getDifficulty()), "medium");
  ASSERT_EQ(d.getRollouts().size(), 2u);
  auto slow = d.getRollouts()[0], wrong = d.getRollouts()[1];
  EXPECT_EQ(slow.getRollout(), 1u);
  EXPECT_EQ(slow.getPrior().getStatus(), proto::Status::TIMEOUT);
  EXPECT_EQ(slow.getPrior().getCheck(), proto::Check::TOO_SLOW);
  EXPECT_EQ(std::string(slow.getPrior().getFeedback()), "call 3 took 9.1 ms");
  ASSERT_EQ(slow.getPrior().getActions().size(), 1u);
  EXPECT_EQ(slow.getPrior().getActions()[0], 11);
  EXPECT_EQ(wrong.getRollout(), 2u);
  EXPECT_EQ(wrong.getPrior().getStatus(), proto::Status::WRONG_ANSWER);
  EXPECT_EQ(std::string(wrong.getPrior().getFeedback()), long_feedback);

  result(10, 1, 2, Status::ok);
  result(10, 2, 2, Status::runtime_error);
  {  // every group final: the step is collected, its update starts
    auto collected = next();
    capnp::FlatArrayMessageReader rc(collected);
    ASSERT_TRUE(test::reader_of(rc).isStepCollected());
    EXPECT_EQ(test::reader_of(rc).getStepCollected().getStep(), 0u);
  }
  words = next();
  capnp::FlatArrayMessageReader rs(words);
  ASSERT_TRUE(test::reader_of(rs).isStepResult());
  auto sr = test::reader_of(rs).getStepResult();
  EXPECT_EQ(sr.getMedium(), 1u);
  EXPECT_EQ(sr.getHopeless(), 1u);
  EXPECT_EQ(sr.getEasy(), 0u);
  EXPECT_EQ(sr.getOutcomes(), 10u);
  EXPECT_EQ(sr.getRollouts(), 8u);
  ASSERT_EQ(sr.getSolvedBy().size(), 2u);
  EXPECT_EQ(sr.getSolvedBy()[0], 2u);  // solved by turn 1
  EXPECT_EQ(sr.getSolvedBy()[1], 3u);  // by turn 2
  EXPECT_EQ(sr.getWeightsVersion(), 1u);

  sync(1, "");
  stop();
  thread_.join();
  EXPECT_FALSE(error_);

  // Every outcome in outcomes.jsonl as it arrived, with its check and its whole feedback.
  std::ifstream in(dir_.path() + "/outcomes.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 10u);
  EXPECT_EQ(lines[1]["check"], "too_slow");
  EXPECT_EQ(lines[2]["feedback"].get<std::string>().size(), long_feedback.size());
  // Each the record `leap eval --out` writes, with the rollout's keys beside it: one JSON shape of a verdict.
  std::set<std::string> want;
  const nlohmann::json record = to_json(EvalOutcome{});
  for (const auto& [k, v] : record.items()) want.insert(k);
  for (const char* k : {"step", "group", "rollout", "turn", "worker", "weights_version", "staleness", "choice",
                        "prompt_tokens", "memory_chars", "span"})
    want.insert(k);
  for (const auto& l : lines) {
    std::set<std::string> keys;
    for (const auto& [k, v] : l.items())
      if (k != "case") keys.insert(k);  // the experience graph's, where the learner keeps one
    EXPECT_EQ(keys, want) << l.dump();
  }
}

TEST_F(LearnerAlone, AResultForAGroupThatIsNotOpenStopsTheLearner) {
  start();
  open_step({10});
  result(12, 0, 1, Status::ok);
  thread_.join();
  ASSERT_TRUE(error_);
  EXPECT_NE(error().find("result for group 12 that is not open"), std::string::npos) << error();
}

// The learner copies the policy's state for a checkpoint, answers the broadcast and trains the
// next step while the copy is written; the coordinator hears when the files are on disk.
TEST_F(LearnerAlone, ACheckpointIsWrittenBesideTheNextStepsTrainingAndReportedOnceOnDisk) {
  auto held = std::make_unique<HeldWrites>(std::move(policy_));
  HeldWrites& h = *held;
  policy_ = std::move(held);
  const std::string ck = dir_.path() + "/checkpoints/step-000001.tmp";
  start();
  easy_step(10);
  sync(1, ck);  // answered with the write held
  EXPECT_FALSE(std::filesystem::exists(ck + "/policy.bin"));
  step_ = 1;
  easy_step(11);  // step 1's update ran to its result while step 0's checkpoint was still unwritten
  EXPECT_FALSE(std::filesystem::exists(ck + "/policy.bin"));
  h.release.set_value();
  auto words = next();
  capnp::FlatArrayMessageReader rd(words);
  ASSERT_TRUE(test::reader_of(rd).isCheckpointWritten());
  auto cw = test::reader_of(rd).getCheckpointWritten();
  EXPECT_EQ(cw.getStep(), 0u);
  EXPECT_EQ(std::string(cw.getDir()), ck);
  EXPECT_GE(cw.getWriteS(), 0.0);
  EXPECT_TRUE(std::filesystem::exists(ck + "/policy.bin"));
  sync(2, "");
  stop();
  thread_.join();
  EXPECT_EQ(error(), "");
}

// A policy that keeps no snapshot saves on the step's path: the files are reported written with
// the broadcast's answer.
TEST_F(LearnerAlone, APolicyWithoutSnapshotsSavesOnTheStepsPathAndReportsItAtOnce) {
  const std::string ck = dir_.path() + "/checkpoints/step-000001.tmp";
  start();
  easy_step(10);
  sync(1, ck);
  auto words = next();
  capnp::FlatArrayMessageReader rd(words);
  ASSERT_TRUE(test::reader_of(rd).isCheckpointWritten());
  EXPECT_EQ(std::string(test::reader_of(rd).getCheckpointWritten().getDir()), ck);
  EXPECT_EQ(test::reader_of(rd).getCheckpointWritten().getWriteS(), 0.0);
  stop();
  thread_.join();
  EXPECT_EQ(error(), "");
}

// A write that fails is the learner's error, naming the folder and the cause.
TEST_F(LearnerAlone, ACheckpointWriteThatFailsStopsTheLearnerWithWhereAndWhy) {
  auto held = std::make_unique<HeldWrites>(std::move(policy_));
  HeldWrites& h = *held;
  h.fail = true;
  policy_ = std::move(held);
  const std::string ck = dir_.path() + "/checkpoints/step-000001.tmp";
  start();
  easy_step(10);
  sync(1, ck);
  h.release.set_value();
  thread_.join();
  EXPECT_NE(error().find("checkpoint " + ck + ": the write failed: No space left on device"), std::string::npos) << error();
}

}  // namespace
}  // namespace leap
