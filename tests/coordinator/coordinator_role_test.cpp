// The coordinator role alone: the test plays the learner (rank 1) and one worker (rank 2) over
// inproc links, as those roles speak to it, and checks what the coordinator sends and records.
#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "coordinator/coordinator_role.h"
#include "support/inproc_ranks.h"
#include "support/test_util.h"

namespace leap {
namespace {

constexpr int kLearner = 1, kWorker = 2;

class CoordinatorAlone : public ::testing::Test {
 protected:
  CoordinatorAlone() : ranks_(3) {
    s_.run.steps = 1;
    s_.run.tasks_per_step = 1;
    s_.run.seed = 7;
    s_.run.worker_timeout_s = 60;
    s_.group_size = 2;
    s_.max_turns = 2;
    s_.tasks = {"relu"};
    s_.run_dir = dir_.path();
    s_.progress = false;
  }
  ~CoordinatorAlone() override {
    if (thread_.joinable()) thread_.join();
  }
  void start() {
    thread_ = std::thread([this] {
      auto log = std::make_shared<spdlog::logger>("coordinator-test", std::make_shared<spdlog::sinks::null_sink_mt>());
      CoordinatorRole c(ranks_.links(0), s_, log);
      try {
        c.run();
      } catch (...) {
        error_ = std::current_exception();
        c.stop_all("test");
      }
    });
  }
  std::string finish() {  // the coordinator's error, "" if it ended well
    thread_.join();
    if (!error_) return "";
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  void work_done(uint32_t rollouts) {
    capnp::MallocMessageBuilder m;
    auto wd = m.initRoot<proto::LoopMessage>().initWorkDone();
    wd.setWorker(kWorker);
    wd.setRollouts(rollouts);
    ranks_.links(kWorker).send(0, m);
  }
  void step_result() {
    capnp::MallocMessageBuilder m;
    auto sr = m.initRoot<proto::LoopMessage>().initStepResult();
    sr.setStep(0);
    sr.setWeightsVersion(1);
    sr.setRollouts(2);
    auto solved = sr.initSolvedBy(2);
    solved.set(0, 1);
    solved.set(1, 2);
    sr.setMedium(1);
    auto rewards = sr.initRewards(2);
    rewards.set(0, 1.0);
    rewards.set(1, 0.5);
    sr.setOutcomes(3);
    sr.setSamples(3);
    ranks_.links(kLearner).send(0, m);
  }
  // Both ranks receive the Sync of version 1 and answer with these checksums.
  void sync(const std::string& learner_sum, const std::string& worker_sum) {
    receive_syncs();
    synced(kLearner, learner_sum);
    synced(kWorker, worker_sum);
  }
  void receive_syncs() {
    for (int r : {kLearner, kWorker}) {
      auto words = ranks_.receive(r);
      capnp::FlatArrayMessageReader rd(words);
      auto msg = test::reader_of(rd);
      ASSERT_TRUE(msg.isSync()) << "rank " << r;
      EXPECT_EQ(msg.getSync().getWeightsVersion(), 1u);
      // The last step is a checkpoint: the learner is told where to save.
      EXPECT_EQ(msg.getSync().getCheckpointDir().size() > 0, r == kLearner);
      if (r == kLearner) checkpoint_dir_ = msg.getSync().getCheckpointDir();
    }
  }
  void synced(int rank, const std::string& sum) {
    capnp::MallocMessageBuilder m;
    auto sd = m.initRoot<proto::LoopMessage>().initSynced();
    sd.setRank(static_cast<uint32_t>(rank));
    sd.setWeightsVersion(1);
    sd.setChecksum(sum);
    ranks_.links(rank).send(0, m);
  }
  // The learner's report that the checkpoint's policy files are on disk.
  void checkpoint_written(const std::string& dir) {
    capnp::MallocMessageBuilder m;
    auto cw = m.initRoot<proto::LoopMessage>().initCheckpointWritten();
    cw.setStep(0);
    cw.setDir(dir);
    cw.setWriteS(0.5);
    ranks_.links(kLearner).send(0, m);
  }
  bool receives_nothing(int rank) {
    try {
      (void)ranks_.receive(rank, std::chrono::milliseconds(300));
      return false;
    } catch (const std::runtime_error&) {
      return true;
    }
  }
  std::string final_dir() const { return dir_.path() + "/checkpoints/step-000001"; }

  // Opens the step and runs its group's two turns as the learner and the worker would.
  void run_group() {
    auto open = ranks_.receive(kLearner);
    capnp::FlatArrayMessageReader ro(open);
    ASSERT_TRUE(test::reader_of(ro).isStepOpen());
    auto so = test::reader_of(ro).getStepOpen();
    ASSERT_EQ(so.getGroups().size(), 1u);
    EXPECT_EQ(std::string(so.getGroups()[0].getTask()), "relu");
    const uint64_t group = so.getGroups()[0].getGroup();

    auto first = ranks_.receive(kWorker);
    capnp::FlatArrayMessageReader r1(first);
    auto a1 = test::reader_of(r1).getAssignment();
    EXPECT_EQ(a1.getTurn(), 1u);
    EXPECT_EQ(a1.getGroup(), group);
    ASSERT_EQ(a1.getRollouts().size(), 2u);  // one worker: the whole group
    for (uint32_t i = 0; i < 2; ++i) {
      EXPECT_EQ(a1.getRollouts()[i].getRollout(), i);
      EXPECT_FALSE(a1.getRollouts()[i].getHasPrior());
      EXPECT_EQ(a1.getRollouts()[i].getSeed(), rollout_seed(7, group, i, 1));
    }
    work_done(2);

    // The learner refines rollout 1, too slow at turn 1: the coordinator forwards its verdict as it
    // is (typed status and check), for the worker's policy to condition on.
    capnp::MallocMessageBuilder m;
    auto d = m.initRoot<proto::LoopMessage>().initDecision();
    d.setStep(0);
    d.setGroup(group);
    d.setTurn(2);
    d.setDifficulty("medium");
    auto rw = d.initRollouts(1)[0];
    rw.setRollout(1);
    rw.setHasPrior(true);
    auto p = rw.initPrior();
    auto acts = p.initActions(2);
    acts.set(0, 5);
    acts.set(1, 6);
    p.setStatus(proto::Status::TIMEOUT);
    p.setCheck(proto::Check::TOO_SLOW);
    p.setFeedback("call 3 took 9.1 ms");
    ranks_.links(kLearner).send(0, m);

    auto second = ranks_.receive(kWorker);
    capnp::FlatArrayMessageReader r2(second);
    auto a2 = test::reader_of(r2).getAssignment();
    EXPECT_EQ(a2.getTurn(), 2u);
    ASSERT_EQ(a2.getRollouts().size(), 1u);
    auto w = a2.getRollouts()[0];
    EXPECT_EQ(w.getRollout(), 1u);
    EXPECT_EQ(w.getSeed(), rollout_seed(7, group, 1, 2));
    ASSERT_TRUE(w.getHasPrior());
    EXPECT_EQ(w.getPrior().getStatus(), proto::Status::TIMEOUT);
    EXPECT_EQ(w.getPrior().getCheck(), proto::Check::TOO_SLOW);
    EXPECT_EQ(std::string(w.getPrior().getFeedback()), "call 3 took 9.1 ms");
    ASSERT_EQ(w.getPrior().getActions().size(), 2u);
    EXPECT_EQ(w.getPrior().getActions()[1], 6);
    work_done(1);
  }
  void expect_stop(int rank) {
    auto words = ranks_.receive(rank);
    capnp::FlatArrayMessageReader rd(words);
    EXPECT_TRUE(test::reader_of(rd).isStop()) << "rank " << rank;
  }

  test::TempDir dir_;
  test::InprocRanks ranks_;
  CoordinatorSettings s_;
  std::thread thread_;
  std::exception_ptr error_;
  std::string checkpoint_dir_;  // where the learner was told to save
};

TEST_F(CoordinatorAlone, RoutesAStepThroughTheLearnersDecisionAndRecordsIt) {
  start();
  run_group();
  step_result();
  sync("abc", "abc");
  // The step is recorded; its checkpoint completes, and the run ends, once the learner has
  // written the policy (it may do so beside the next step's training).
  EXPECT_TRUE(receives_nothing(kLearner));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/metrics.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(final_dir()));
  checkpoint_written(checkpoint_dir_);
  expect_stop(kLearner);
  expect_stop(kWorker);
  EXPECT_EQ(finish(), "");
  EXPECT_FALSE(std::filesystem::exists(checkpoint_dir_));
  std::ifstream state(final_dir() + "/state.json");
  auto st = nlohmann::json::parse(state);
  EXPECT_EQ(st["completed_steps"], 1);
  EXPECT_EQ(st["weights_version"], 1);
  EXPECT_EQ(st["weights_checksum"], "abc");
  std::ifstream in(dir_.path() + "/metrics.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  auto rec = nlohmann::json::parse(line);
  EXPECT_EQ(rec["step"], 0);
  EXPECT_EQ(rec["dcp"]["medium"], 1);
  EXPECT_EQ(rec["evaluations"], 3);
  EXPECT_EQ(rec["weights_version"], 1);
  EXPECT_EQ(rec["weights_checksum"], "abc");
  EXPECT_EQ(rec["solve_at"], nlohmann::json::array({0.5, 1.0}));
  EXPECT_EQ(rec["tasks"], nlohmann::json::array({"relu"}));
  EXPECT_FALSE(std::getline(in, line)) << "one step, one record";
}

TEST_F(CoordinatorAlone, WeightsThatDifferAfterTheBroadcastStopTheRun) {
  start();
  run_group();
  step_result();
  sync("abc", "abd");
  expect_stop(kLearner);
  expect_stop(kWorker);
  EXPECT_NE(finish().find("weights differ after the broadcast: rank 2 has abd, the learner abc"), std::string::npos);
}

// A learner that saves on the step's path reports the files written before every rank has
// answered the broadcast: the checkpoint completes with the step's record.
TEST_F(CoordinatorAlone, ACheckpointWrittenBeforeTheBroadcastEndsCompletesWithTheStep) {
  start();
  run_group();
  step_result();
  receive_syncs();
  synced(kLearner, "abc");
  checkpoint_written(checkpoint_dir_);
  EXPECT_TRUE(receives_nothing(kLearner));
  EXPECT_FALSE(std::filesystem::exists(final_dir())) << "complete before its step's record";
  synced(kWorker, "abc");
  expect_stop(kLearner);
  expect_stop(kWorker);
  EXPECT_EQ(finish(), "");
  EXPECT_TRUE(std::filesystem::exists(final_dir() + "/state.json"));
}

// A report of the files written to another folder than the one the learner was given stops the run.
TEST_F(CoordinatorAlone, ACheckpointReportOfAnotherFolderIsAProtocolError) {
  start();
  run_group();
  step_result();
  sync("abc", "abc");
  checkpoint_written(dir_.path() + "/elsewhere");
  expect_stop(kLearner);
  expect_stop(kWorker);
  const std::string err = finish();
  EXPECT_NE(err.find("wrote step 0's checkpoint to " + dir_.path() + "/elsewhere, not " + checkpoint_dir_), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(final_dir()));
}

TEST_F(CoordinatorAlone, AWorkReportFromANonWorkerIsAProtocolError) {
  start();
  (void)ranks_.receive(kLearner);  // the step's opening
  (void)ranks_.receive(kWorker);   // turn 1
  capnp::MallocMessageBuilder m;
  auto wd = m.initRoot<proto::LoopMessage>().initWorkDone();
  wd.setWorker(kLearner);
  wd.setRollouts(2);
  ranks_.links(kLearner).send(0, m);
  expect_stop(kLearner);
  expect_stop(kWorker);
  EXPECT_NE(finish().find("work report from rank 1, not a worker"), std::string::npos);
}

}  // namespace
}  // namespace leap
