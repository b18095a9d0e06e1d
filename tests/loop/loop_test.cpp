// The RL loop with every role as a thread of one process over real ZeroMQ inproc sockets,
// real compilers and real evaluator processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <map>

#include "common/config.h"
#include "common/paths.h"
#include "common/run_dir.h"
#include "loop/loop_wiring.h"
#include "memory/memory.h"
#include "support/loop_checks.h"
#include "support/test_util.h"

namespace leap {
namespace {

const std::string kConfig = test::loop_config(R"(
[run]
name = "inprocess"
tasks = ["relu", "softmax", "gemm_bias_relu", "silu"]
steps = 3
tasks_per_step = 2
checkpoint_every = 2
seed = 7
[memory]
record = true
)");

TEST(LoopInProcess, RolesAsThreadsKeepTheInvariants) {
  ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
  ::setenv("LEAP_EVALD", (test::build_dir() + "/leap-evald").c_str(), 1);
  test::TempDir dir;
  LeapConfig cfg = parse_config(kConfig, "test.toml");
  RunPlan plan = make_plan(cfg, kConfig, dir.path() + "/run");
  plan.progress = false;
  run_in_process(plan, 2, false);

  auto seen = test::check_outcome_invariants(plan.run_dir, 8, 3, 4, 8);
  for (const auto& o : test::read_jsonl(plan.run_dir + "/outcomes.jsonl"))  // max_staleness = 0: on-policy
    EXPECT_EQ(o["staleness"], 0) << o.dump();
  auto metrics = test::read_jsonl(plan.run_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 3u);
  int easy = 0, medium = 0, hopeless = 0;
  for (size_t i = 0; i < metrics.size(); ++i) {
    const auto& m = metrics[i];
    EXPECT_EQ(m["step"], static_cast<int>(i));
    EXPECT_EQ(m["weights_version"], i + 1);
    EXPECT_EQ(m["solve_at"].size(), 3u);
    EXPECT_EQ(m["rewards"].size(), 16u);
    for (const char* k : {"generate", "compile", "evaluate", "learn", "broadcast", "checkpoint", "bookkeeping", "idle"})
      EXPECT_TRUE(m["time_s"].contains(k)) << k;
    // The learner's save is the step's checkpoint time, where the step has a checkpoint.
    if (std::filesystem::exists(checkpoint_dir(plan.run_dir, static_cast<int>(i) + 1)))
      EXPECT_GT(m["time_s"]["checkpoint"].get<double>(), 0) << "step " << i;
    else
      EXPECT_EQ(m["time_s"]["checkpoint"].get<double>(), 0) << "step " << i;
    easy += m["dcp"]["easy"].get<int>();
    medium += m["dcp"]["medium"].get<int>();
    hopeless += m["dcp"]["hopeless"].get<int>();
  }
  EXPECT_EQ(easy, seen.easy);
  EXPECT_EQ(medium, seen.medium);
  EXPECT_EQ(hopeless, seen.hopeless);
  auto sums = test::checksums_by_version(plan.run_dir);
  EXPECT_EQ(sums.size(), 3u);
  for (const auto& [version, s] : sums) {
    EXPECT_EQ(s.size(), 3u) << "version " << version;
    EXPECT_EQ(std::set<std::string>(s.begin(), s.end()).size(), 1u) << "ranks disagree on weights version " << version;
  }
  EXPECT_TRUE(std::filesystem::exists(plan.run_dir + "/checkpoints/step-000002/state.json"));
  EXPECT_TRUE(std::filesystem::exists(plan.run_dir + "/checkpoints/step-000003/policy.pt"));

  // [memory] record: every outcome but leap's own faults is a case; a later turn's case refines
  // the same rollout's previous turn.
  memory::Memory mem(plan.run_dir + "/memory.db", false);
  size_t recorded = 0;
  for (const auto& o : test::read_jsonl(plan.run_dir + "/outcomes.jsonl")) {
    if (o["status"] == "infra_error") {
      EXPECT_FALSE(o.contains("case"));
      continue;
    }
    ASSERT_TRUE(o.contains("case")) << o.dump();
    auto c = mem.get(o["case"].get<int64_t>());
    ASSERT_TRUE(c.has_value());
    ++recorded;
    EXPECT_EQ(c->task, o["task"]);
    EXPECT_EQ(to_string(c->status), o["status"].get<std::string>());
    EXPECT_EQ(c->turn, o["turn"].get<int>());
    EXPECT_NE(c->source.find("leap_kernel"), std::string::npos);
    EXPECT_EQ(c->decision, o["choice"].get<std::string>());  // the schedule policy's knob choices
    EXPECT_FALSE(c->decision.empty());
    if (c->turn > 1) {
      auto p = mem.get(c->predecessor);
      ASSERT_TRUE(p.has_value()) << "turn " << c->turn << " without its previous turn";
      EXPECT_EQ(p->turn, c->turn - 1);
      EXPECT_EQ(p->task, c->task);
      EXPECT_EQ(c->relation, "refined");
    } else {
      EXPECT_EQ(c->predecessor, 0);
    }
  }
  EXPECT_GT(recorded, 0u);
  EXPECT_EQ(mem.cases().size(), recorded);

  // leap report draws the run's experience graph: per task (most cases first, 6 at most) a
  // forest with a circle per case and a line from each case to the attempt it refined.
  const std::string cmd = test::build_dir() + "/leap report " + plan.run_dir + " > " + dir.path() + "/report.out 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(plan.run_dir + "/report.html");
  std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::pair<size_t, std::string>> tasks;
  for (const auto& t : mem.tasks()) tasks.emplace_back(mem.cases(t).size(), t);
  std::sort(tasks.begin(), tasks.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  ASSERT_FALSE(tasks.empty());
  int edges_total = 0;
  for (size_t i = 0; i < tasks.size() && i < 6; ++i) {
    const std::string& task = tasks[i].second;
    auto at = html.find("data-chart=\"forest-" + task + "\"");
    ASSERT_NE(at, std::string::npos) << "no experience graph of " << task;
    std::string svg = html.substr(at, html.find("</svg>", at) - at);
    auto count = [&](const std::string& what) {
      int n = 0;
      for (auto p = svg.find(what); p != std::string::npos; p = svg.find(what, p + 1)) ++n;
      return n;
    };
    auto cases = mem.cases(task);
    int edges = 0;
    for (const auto& c : cases) edges += c.predecessor != 0;
    EXPECT_EQ(count("<circle class=\"mark\""), static_cast<int>(cases.size())) << task;
    EXPECT_EQ(count("stroke=\"#999\""), edges) << task;
    edges_total += edges;
    // Rows readable however many cases: at least 14 px apart.
    std::set<double> rows;
    for (auto p = svg.find("<circle class=\"mark\""); p != std::string::npos; p = svg.find("<circle class=\"mark\"", p + 1))
      rows.insert(std::stod(svg.substr(svg.find("cy=\"", p) + 4)));
    for (auto a = rows.begin(), b = std::next(rows.begin()); b != rows.end(); ++a, ++b) EXPECT_GE(*b - *a, 14.0) << task;
  }
  EXPECT_GT(edges_total, 0) << "no refined case among the drawn tasks";
}

// The loop's test config with the LM policy on the tiny random Qwen2 fixture (8 new tokens).
LeapConfig lm_loop_config() {
  ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
  ::setenv("LEAP_EVALD", (test::build_dir() + "/leap-evald").c_str(), 1);
  LeapConfig cfg = parse_config(kConfig, "test.toml");
  cfg.policy.kind = "lm";
  cfg.policy.model = test::source_dir() + "/tests/fixtures/lm/tiny-qwen2";
  cfg.policy.max_new_tokens = 8;
  cfg.policy.lr = 1e-3;
  // The fixture's answers are noise, so every group fails entirely (hopeless, pruned by default);
  // the LM loop tests refine them to exercise later turns.
  cfg.learner.refine_all_failed = true;
  return cfg;
}

TEST(LoopInProcess, LmPolicyWritesKernelsAsTextAndAnAnswerWithoutCodeIsACompileError) {
  // The tiny random Qwen2 fixture stands in for a real model: its answers are noise (no code
  // block), so every outcome is a compile_error with that feedback; the loop around it (prompts,
  // a second turn with the verdict, token-level training, weight broadcast) is what is tested.
  test::TempDir dir;
  LeapConfig cfg = lm_loop_config();
  cfg.run.tasks = {"relu", "silu"};
  cfg.run.steps = 2;
  cfg.learner.group_size = 2;
  cfg.learner.max_turns = 2;
  cfg.memory.record = false;
  cfg.policy.generate_batch = 1;  // a worker's turn in several batches, each compiled as the next is written
  RunPlan plan = make_plan(cfg, kConfig, dir.path() + "/run");
  plan.progress = false;
  run_in_process(plan, 2, false);
  test::check_outcome_invariants(plan.run_dir, 2, 2, 1, 2, true);
  auto outcomes = test::read_jsonl(plan.run_dir + "/outcomes.jsonl");
  ASSERT_FALSE(outcomes.empty());
  int second_turns = 0;
  for (const auto& o : outcomes) {
    EXPECT_EQ(o["status"], "compile_error") << o.dump();
    EXPECT_NE(o["feedback"].get<std::string>().find("no fenced code block"), std::string::npos) << o.dump();
    second_turns += o["turn"] == 2;
  }
  EXPECT_GT(second_turns, 0);  // every group failed at turn 1: refine_all_failed refines it
  auto metrics = test::read_jsonl(plan.run_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 2u);
  auto sums = test::checksums_by_version(plan.run_dir);
  for (const auto& [version, s] : sums)
    EXPECT_EQ(std::set<std::string>(s.begin(), s.end()).size(), 1u) << "ranks disagree on weights version " << version;
  EXPECT_TRUE(std::filesystem::exists(plan.run_dir + "/checkpoints/step-000002/model.safetensors"));
}

// [memory] prompts: workers ask the learner (the memory's one owner) over the loop's links for
// each rollout's context, and the LM policy's prompt carries it. Step 0 turn 1 has nothing to
// remember; its turn 2 has its own previous attempt; step 1 has step 0's cases of the task.
TEST(LoopInProcess, LmPromptsCarryTheExperienceMemorysContextAskedOfTheLearner) {
  test::TempDir dir;
  LeapConfig cfg = lm_loop_config();
  cfg.run.tasks = {"relu"};
  cfg.run.tasks_per_step = 1;
  cfg.run.steps = 2;
  cfg.learner.group_size = 2;
  cfg.learner.max_turns = 2;
  cfg.memory.record = true;
  cfg.memory.prompts = true;
  cfg.memory.budget_tokens = 300;
  cfg.memory.notes = false;  // the target's notes would be context before anything is remembered
  RunPlan plan = make_plan(cfg, kConfig, dir.path() + "/run");
  plan.progress = false;
  run_in_process(plan, 2, false);
  auto outcomes = test::read_jsonl(plan.run_dir + "/outcomes.jsonl");
  ASSERT_FALSE(outcomes.empty());
  size_t bare = 0;  // prompt tokens without any context (step 0, turn 1)
  int with_context = 0;
  for (const auto& o : outcomes)
    if (o["step"] == 0 && o["turn"] == 1) {
      EXPECT_EQ(o["memory_chars"], 0) << o.dump();
      bare = o["prompt_tokens"].get<size_t>();
    }
  ASSERT_GT(bare, 0u);
  for (const auto& o : outcomes) {
    if (o["step"] == 0 && o["turn"] == 1) continue;
    EXPECT_GT(o["memory_chars"].get<int>(), 0) << o.dump();
    EXPECT_LE(o["memory_chars"].get<int>(), 4 * 300 + 400) << "over the token budget: " << o.dump();
    if (o["turn"] == 1) {
      EXPECT_GT(o["prompt_tokens"].get<size_t>(), bare) << o.dump();
    }
    ++with_context;
  }
  EXPECT_GT(with_context, 0);
  // The graph keeps what each prompt showed: step 1's first turns retrieved step 0's cases, never
  // their own predecessor, never a later case.
  memory::Memory mem(plan.run_dir + "/memory.db", false);
  int retrieving = 0;
  for (const auto& c : mem.cases("relu")) {
    retrieving += !c.retrieved.empty();
    for (int64_t r : c.retrieved) {
      EXPECT_LT(r, c.id);
      EXPECT_NE(r, c.predecessor);
    }
  }
  EXPECT_GT(retrieving, 0);
}

TEST(LoopInProcess, AFreshRunRefusesAnExistingRunDirectory) {
  ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
  test::TempDir dir;
  dir.write("run/metrics.jsonl", "{}\n");
  LeapConfig cfg = parse_config(kConfig, "test.toml");
  RunPlan plan = make_plan(cfg, kConfig, dir.path() + "/run");
  try {
    prepare_run_dir(plan, false);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--resume"), std::string::npos) << e.what();
  }
  try {
    prepare_run_dir(plan, true);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("no complete checkpoint"), std::string::npos) << e.what();
  }
}

TEST(LoopInProcess, ReplayPolicyRunsRecordedCandidates) {
  ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
  ::setenv("LEAP_EVALD", (test::build_dir() + "/leap-evald").c_str(), 1);
  test::TempDir dir;
  // relu: the bundled example and a hostile one that crashes; softmax: the example only.
  dir.write("cands/relu.good.cpp", read_file(test::source_dir() + "/examples/cpu/relu.cpp"));
  dir.write("cands/relu.segv.cpp", read_file(test::source_dir() + "/tests/fixtures/hostile/cpu/relu.segfault.cpp"));
  dir.write("cands/softmax.cpp", read_file(test::source_dir() + "/examples/cpu/softmax.cpp"));
  LeapConfig cfg = parse_config(kConfig, "test.toml");
  cfg.policy.kind = "replay";
  cfg.policy.candidates = dir.path() + "/cands";
  cfg.run.tasks = {};  // every task the replay policy has a candidate for
  cfg.run.steps = 2;
  cfg.learner.group_size = 4;
  cfg.learner.t_min = 1;
  cfg.learner.t_max = 3;
  RunPlan plan = make_plan(cfg, kConfig, dir.path() + "/run");
  ASSERT_EQ(plan.tasks.size(), 2u);
  plan.progress = false;
  run_in_process(plan, 2, false);
  auto outcomes = test::read_jsonl(plan.run_dir + "/outcomes.jsonl");
  ASSERT_FALSE(outcomes.empty());
  for (const auto& o : outcomes) {
    const std::string choice = o["choice"];
    const std::string expected = choice == "relu.segv.cpp" ? "runtime_error" : "ok";
    EXPECT_EQ(o["status"], expected) << choice;
  }
  test::check_outcome_invariants(plan.run_dir, 4, 3, 1, 3);
}

// advantage_baseline = "turn": a sample alone at its turn in its group gets the step's
// leave-one-out advantage. Every step's count of them in the learner's batch is the count the
// step's outcomes imply (groups x turns >= 2 that exactly one rollout reached). Replayed choices
// (a good relu or softmax, two that crash) make refinement and cohorts of one happen.
TEST(LoopInProcess, APerTurnBaselinesLoneSamplesReachTheLearnersLeaveOneOut) {
  ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
  ::setenv("LEAP_EVALD", (test::build_dir() + "/leap-evald").c_str(), 1);
  test::TempDir dir;
  const std::string segv = read_file(test::source_dir() + "/tests/fixtures/hostile/cpu/relu.segfault.cpp");
  for (const char* task : {"relu", "softmax"}) {
    dir.write(std::string("cands/") + task + ".a_good.cpp",
              read_file(test::source_dir() + "/examples/cpu/" + task + ".cpp"));
    dir.write(std::string("cands/") + task + ".b_crash.cpp", segv);
    dir.write(std::string("cands/") + task + ".c_crash.cpp", segv);
  }
  LeapConfig cfg = parse_config(kConfig, "test.toml");
  cfg.policy.kind = "replay";
  cfg.policy.candidates = dir.path() + "/cands";
  cfg.run.tasks = {};
  cfg.run.steps = 4;
  cfg.learner.group_size = 4;
  cfg.learner.max_turns = 3;
  cfg.learner.advantage_baseline = "turn";
  RunPlan plan = make_plan(cfg, kConfig, dir.path() + "/run");
  plan.progress = false;
  run_in_process(plan, 2, false);
  std::map<int, std::map<std::pair<int64_t, int>, std::set<int>>> reached;  // step -> (group, turn) -> rollouts
  for (const auto& o : test::read_jsonl(plan.run_dir + "/outcomes.jsonl"))
    reached[o["step"].get<int>()][{o["group"].get<int64_t>(), o["turn"].get<int>()}].insert(o["rollout"].get<int>());
  auto metrics = test::read_jsonl(plan.run_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 4u);
  int total = 0;
  for (const auto& m : metrics) {
    int lone = 0;
    for (const auto& [key, rollouts] : reached[m["step"].get<int>()]) lone += key.second >= 2 && rollouts.size() == 1;
    EXPECT_EQ(m["lone_samples"].get<int>(), lone) << m.dump();
    total += lone;
  }
  EXPECT_GT(total, 0) << "no cohort of one: the test shows nothing";
}

// [run] max_staleness = 1 under a slow learner (many epochs per update): the next step is
// generated while the learner trains, never with weights more than one version behind the ones
// it trains, and every step is recorded once with its staleness counts.
TEST(LoopInProcess, BoundedStalenessOverlapsStepsWithinTheBound) {
  ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
  ::setenv("LEAP_EVALD", (test::build_dir() + "/leap-evald").c_str(), 1);
  test::TempDir dir;
  LeapConfig cfg = parse_config(kConfig, "test.toml");
  cfg.run.steps = 4;
  cfg.run.max_staleness = 1;
  cfg.policy.epochs = 3000;  // seconds per update: the next step's first turn is generated meanwhile
  cfg.memory.record = false;
  RunPlan plan = make_plan(cfg, kConfig, dir.path() + "/run");
  plan.progress = false;
  run_in_process(plan, 2, false);

  auto metrics = test::read_jsonl(plan.run_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 4u);
  std::map<int, std::vector<int>> counted;  // step -> rollout-turns by staleness, from the outcomes
  int stale = 0;
  for (const auto& o : test::read_jsonl(plan.run_dir + "/outcomes.jsonl")) {
    const int step = o["step"].get<int>(), st = o["staleness"].get<int>();
    // The weights a step trains are version step (fresh run); its rollouts' are at most one older.
    EXPECT_EQ(st, step - o["weights_version"].get<int>()) << o.dump();
    EXPECT_GE(st, 0);
    EXPECT_LE(st, 1) << o.dump();
    auto& c = counted[step];
    if (c.size() <= static_cast<size_t>(st)) c.resize(static_cast<size_t>(st) + 1, 0);
    c[static_cast<size_t>(st)]++;
    stale += st;
  }
  EXPECT_EQ(counted[0], std::vector<int>({static_cast<int>(metrics[0]["evaluations"].get<int>())}));
  EXPECT_GT(stale, 0) << "no step overlapped the learner's update: the test shows nothing";
  for (size_t i = 0; i < metrics.size(); ++i) {
    const auto& m = metrics[i];
    EXPECT_EQ(m["step"], static_cast<int>(i));
    EXPECT_EQ(m["weights_version"], i + 1);
    auto hist = m["staleness"].get<std::vector<int>>();
    while (hist.size() > 1 && hist.back() == 0) hist.pop_back();
    EXPECT_EQ(hist, counted[static_cast<int>(i)]) << m.dump();
    EXPECT_GT(m["interval_s"].get<double>(), 0);
  }
  auto sums = test::checksums_by_version(plan.run_dir);
  EXPECT_EQ(sums.size(), 4u);
  for (const auto& [version, s] : sums)
    EXPECT_EQ(std::set<std::string>(s.begin(), s.end()).size(), 1u) << "ranks disagree on weights version " << version;
}

// A batch that takes longer than [run] worker_timeout_s is not a dead worker: the worker reports
// progress as its rollouts are generated and evaluated, and the run completes.
TEST(LoopInProcess, AWorkerBusyLongerThanTheTimeoutReportsProgressAndTheRunCompletes) {
  ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
  ::setenv("LEAP_EVALD", (test::build_dir() + "/leap-evald").c_str(), 1);
  test::TempDir dir;
  dir.write("cands/relu.good.cpp", read_file(test::source_dir() + "/examples/cpu/relu.cpp"));
  LeapConfig cfg = parse_config(kConfig, "test.toml");
  cfg.policy.kind = "replay";
  cfg.policy.candidates = dir.path() + "/cands";
  cfg.run.tasks = {};
  cfg.run.steps = 1;
  cfg.learner.group_size = 64;
  cfg.learner.max_turns = 1;
  cfg.run.worker_timeout_s = 1.5;
  RunPlan plan = make_plan(cfg, kConfig, dir.path() + "/run");
  plan.progress = false;
  run_in_process(plan, 1, false);  // one worker: the whole step is one batch
  auto metrics = test::read_jsonl(plan.run_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  // The test means something only if the batch outlasted the timeout by far.
  EXPECT_GT(metrics[0]["time_s"]["evaluate"].get<double>(), 2 * cfg.run.worker_timeout_s) << metrics[0].dump();
  auto outcomes = test::read_jsonl(plan.run_dir + "/outcomes.jsonl");
  ASSERT_EQ(outcomes.size(), 64u);
  for (const auto& o : outcomes) EXPECT_EQ(o["status"], "ok") << o["check"] << ": " << o["feedback"];
}

TEST(LoopInProcess, AFailingRoleStopsEveryRoleWithItsError) {
  ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
  ::setenv("LEAP_EVALD", "/nonexistent/leap-evald", 1);  // workers cannot start their evaluators
  test::TempDir dir;
  LeapConfig cfg = parse_config(kConfig, "test.toml");
  RunPlan plan = make_plan(cfg, kConfig, dir.path() + "/run");
  plan.progress = false;
  try {
    run_in_process(plan, 2, false);
    FAIL() << "expected the run to fail";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("leap-evald"), std::string::npos) << e.what();
  }
  ::setenv("LEAP_EVALD", (test::build_dir() + "/leap-evald").c_str(), 1);
}

}  // namespace
}  // namespace leap
