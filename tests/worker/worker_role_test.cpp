// The worker role alone, with a real compile farm and real judges: the test plays the coordinator
// (rank 0) and the learner (rank 1) over inproc links. The replay policy writes the bundled
// examples, so what is checked is the worker's part: every scheduled rollout-turn gets exactly
// one result, with its keys, the judge's verdict and the generation record, and the batch's
// account goes to the coordinator.
#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>

#include <exception>
#include <map>
#include <thread>

#include "common/outcome_proto.h"
#include "common/paths.h"
#include "support/inproc_ranks.h"
#include "support/pipeline_fixture.h"
#include "support/test_util.h"
#include "worker/worker_role.h"

namespace leap {
namespace {

constexpr int kCoordinator = 0, kLearner = 1, kWorker = 2;

TEST(WorkerAlone, EveryScheduledRolloutTurnGetsOneResultAndTheBatchIsAccountedFor) {
  test::TempDir dir;
  ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
  LeapConfig cfg = test::test_config(dir.path());
  PolicyConfig pc;
  pc.kind = "replay";
  pc.candidates = test::source_dir() + "/examples/cpu";
  auto policy = make_policy(pc, 1);
  std::vector<Task> tasks;
  for (const auto& t : load_suite("builtin"))
    if (t.name == "relu" || t.name == "softmax") tasks.push_back(t);
  ASSERT_EQ(tasks.size(), 2u);

  test::InprocRanks ranks(3);
  InProcessWeightChannel weights(2);  // the learner (the test, as root) and this worker
  auto log = std::make_shared<spdlog::logger>("worker-test", std::make_shared<spdlog::sinks::null_sink_mt>());
  EvalPipeline pipeline(cfg, Backend::cpu, test::build_dir() + "/leap-evald", log);
  std::exception_ptr error;
  std::thread worker([&] {
    try {
      WorkerRole w(ranks.links(kWorker), weights, *policy, pipeline, tasks, Backend::cpu, log);
      w.run();
    } catch (...) {
      error = std::current_exception();
    }
  });
  std::vector<float> none;
  weights.broadcast(none, true);  // the learner's initial weights (the replay policy has none)

  // One batch: relu's rollouts 0 and 1 at turn 1, softmax's rollout 3 at turn 2 with its prior,
  // and a task this worker's suite lacks.
  auto assign = [&](const std::string& task, uint64_t group, uint32_t turn, std::vector<uint32_t> rollouts) {
    capnp::MallocMessageBuilder m;
    auto a = m.initRoot<proto::LoopMessage>().initAssignment();
    a.setStep(4);
    a.setGroup(group);
    a.setTask(task);
    a.setTurn(turn);
    auto rs = a.initRollouts(static_cast<unsigned>(rollouts.size()));
    for (unsigned i = 0; i < rollouts.size(); ++i) {
      rs[i].setRollout(rollouts[i]);
      rs[i].setSeed(100 + rollouts[i]);
      if (turn > 1) {
        rs[i].setHasPrior(true);
        rs[i].initPrior().setStatus(proto::Status::WRONG_ANSWER);
      }
    }
    ranks.links(kCoordinator).send(kWorker, m);
  };
  assign("relu", 40, 1, {0, 1});
  assign("softmax", 41, 2, {3});
  assign("no_such_task", 42, 1, {0});

  std::map<std::tuple<uint64_t, uint32_t, uint32_t>, Status> results;
  for (int i = 0; i < 4; ++i) {
    auto words = ranks.receive(kLearner, std::chrono::seconds(120));
    capnp::FlatArrayMessageReader rd(words);
    auto msg = test::reader_of(rd);
    ASSERT_TRUE(msg.isResult());
    auto r = msg.getResult();
    EXPECT_EQ(r.getStep(), 4u);
    EXPECT_EQ(r.getWorker(), static_cast<uint32_t>(kWorker));
    auto key = std::make_tuple(r.getGroup(), r.getRollout(), r.getTurn());
    EXPECT_EQ(results.count(key), 0u) << "one result per rollout-turn";
    EvalOutcome o = from_proto(r.getOutcome());
    results[key] = o.status;
    if (o.status == Status::infra_error) {
      EXPECT_NE(o.feedback.find("not in this worker's suite"), std::string::npos) << o.feedback;
    } else {
      EXPECT_FALSE(std::string(r.getSource()).empty());
      EXPECT_GT(r.getGeneration().getEndS(), 0);
    }
  }
  EXPECT_EQ(results.at(std::make_tuple(40, 0, 1)), Status::ok);
  EXPECT_EQ(results.at(std::make_tuple(40, 1, 1)), Status::ok);
  EXPECT_EQ(results.at(std::make_tuple(41, 3, 2)), Status::ok);
  EXPECT_EQ(results.at(std::make_tuple(42, 0, 1)), Status::infra_error);

  // The batch's account: every rollout, judged or not.
  uint32_t reported = 0;
  while (reported < 4) {
    auto words = ranks.receive(kCoordinator, std::chrono::seconds(60));
    capnp::FlatArrayMessageReader rd(words);
    auto msg = test::reader_of(rd);
    if (msg.isProgress()) continue;
    ASSERT_TRUE(msg.isWorkDone());
    EXPECT_EQ(msg.getWorkDone().getWorker(), static_cast<uint32_t>(kWorker));
    reported += msg.getWorkDone().getRollouts();
  }
  EXPECT_EQ(reported, 4u);

  capnp::MallocMessageBuilder stop;
  stop.initRoot<proto::LoopMessage>().initStop().setReason("test");
  ranks.links(kCoordinator).send(kWorker, stop);
  worker.join();
  EXPECT_FALSE(error);
}

}  // namespace
}  // namespace leap
