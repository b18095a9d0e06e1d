#include <filesystem>
#include <map>

#include "common/clock.h"
#include "common/error.h"
#include "support/pipeline_fixture.h"

namespace leap {
namespace {

class BuiltinSuite : public test::PipelineTest {};

TEST_F(BuiltinSuite, EveryExampleCandidateIsOk) {
  auto tasks = load_suite("builtin");
  auto cands = load_candidates(test::source_dir() + "/examples/cpu", Backend::cpu);
  // One example per task, every task covered.
  std::set<std::string> covered;
  for (const auto& c : cands) covered.insert(c.task);
  EXPECT_EQ(covered.size(), tasks.size());

  const auto cfg = test::test_config(cache_.path());
  auto pipeline = make(cfg);
  auto outcomes = pipeline->run(tasks, cands);
  ASSERT_EQ(outcomes.size(), cands.size());
  for (const auto& o : outcomes) {
    EXPECT_EQ(o.status, Status::ok) << o.task << ": " << o.feedback;
    EXPECT_EQ(o.correct_trials(), o.trials.size()) << o.task;
    EXPECT_GE(o.trials.size(), 5u) << o.task;  // the trials plus the pointer-cache probe
    EXPECT_GT(o.speedup, 0) << o.task;
    EXPECT_GT(o.reference_timing.median_us, 0) << o.task;
    // min_samples, unless the timed calls alone spent the timing budget: then the over-budget floor.
    const auto& t = o.candidate_timing;
    EXPECT_GE(t.samples, cfg.eval.over_budget_samples) << o.task;
    if (t.total_us < 1000 * cfg.eval.timing_budget_ms) {
      EXPECT_GE(t.samples, cfg.eval.min_samples) << o.task;
    }
  }
  EXPECT_EQ(pipeline->evaluator_restarts(), 0);
}

// No tolerance a shortcut fits, no input the operation is the identity on: on every task an
// all-zero answer, a copy of an input of the output's size, and a constant 1/(last dimension)
// (a normalisation skipped) are wrong answers.
TEST_F(BuiltinSuite, NoShortcutPassesAnyTask) {
  const std::string head = R"(#include <leap/candidate.h>
#include <string.h>
LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)stream;
  for (int o = 0; o < n_out; ++o) {
    const int64_t n = leap_numel(&out[o]);
    const size_t size = (size_t)n * ((out[o].dtype.bits * out[o].dtype.lanes + 7) / 8);
    char* y = LEAP_DATA(char, &out[o]);
    memset(y, 0, size);
)";
  const std::string tail = "  }\n  (void)n_in;\n  return 0;\n}\n";
  const std::map<std::string, std::string> shortcuts = {
      {"zeros", ""},
      {"copy", R"(    for (int i = 0; i < n_in; ++i)
      if (leap_numel(&in[i]) == n && in[i].dtype.code == out[o].dtype.code && in[i].dtype.bits == out[o].dtype.bits) {
        memcpy(y, LEAP_DATA(const char, &in[i]), size);
        break;
      }
)"},
      {"uniform", R"(    const double v = out[o].ndim ? 1.0 / (double)out[o].shape[out[o].ndim - 1] : 1.0;
    if (out[o].dtype.code == kDLFloat && out[o].dtype.bits == 32)
      for (int64_t i = 0; i < n; ++i) ((float*)y)[i] = (float)v;
    if (out[o].dtype.code == kDLFloat && out[o].dtype.bits == 64)
      for (int64_t i = 0; i < n; ++i) ((double*)y)[i] = v;
)"}};
  auto tasks = load_suite("builtin");
  std::vector<CandidateSource> run;
  for (const auto& t : tasks)
    for (const auto& [kind, body] : shortcuts) run.push_back({t.name, t.name + "." + kind + ".cpp", head + body + tail, kind});
  auto outcomes = make(test::test_config(cache_.path()))->run(tasks, run);
  ASSERT_EQ(outcomes.size(), run.size());
  for (size_t i = 0; i < run.size(); ++i)
    EXPECT_EQ(outcomes[i].status, Status::wrong_answer) << run[i].name << ": " << outcomes[i].feedback;
}

TEST_F(BuiltinSuite, InfrastructureFailuresAreOutcomesNotCrashes) {
  auto tasks = load_suite("builtin");
  auto cands = load_candidates(test::source_dir() + "/examples/cpu/relu.cpp", Backend::cpu);
  auto cfg = test::test_config(cache_.path());
  auto pipeline = make(cfg);
  std::filesystem::remove_all(cache_.path() + "/tmp");  // the farm can no longer make work dirs
  auto outcomes = pipeline->run(tasks, cands);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].status, Status::infra_error);
  EXPECT_NE(outcomes[0].feedback.find("compile farm"), std::string::npos) << outcomes[0].feedback;
  EXPECT_NE(outcomes[0].feedback.find("after 3 attempts"), std::string::npos) << outcomes[0].feedback;
}

TEST_F(BuiltinSuite, CompilesStartedBeforeTheRunAreTheOnesItEvaluates) {
  // The worker starts a batch's compiles while the policy writes the next batch, then runs the
  // pipeline with those compiles: the run must evaluate them, not compile the candidates again.
  auto tasks = load_suite("builtin");
  auto cands = load_candidates(test::source_dir() + "/examples/cpu/relu.cpp", Backend::cpu);
  auto more = load_candidates(test::source_dir() + "/examples/cpu/softmax.cpp", Backend::cpu);
  cands.insert(cands.end(), more.begin(), more.end());
  auto pipeline = make(test::test_config(cache_.path()));
  std::vector<std::shared_future<CompileResult>> started;
  for (const auto& c : cands) started.push_back(pipeline->submit_compile(c));
  for (auto& f : started) ASSERT_TRUE(f.get().ok) << f.get().diagnostics;
  const double run_start_s = unix_seconds();
  auto outcomes = pipeline->run(tasks, cands, nullptr, started);
  ASSERT_EQ(outcomes.size(), cands.size());
  for (const auto& o : outcomes) {
    EXPECT_EQ(o.status, Status::ok) << o.task << ": " << o.feedback;
    EXPECT_FALSE(o.cache_hit) << o.task << ": compiled again (a cache lookup) instead of using the started compile";
    EXPECT_LT(o.stages.compile_end_s, run_start_s) << o.task;
  }
  // A run given the wrong number of compiles is refused, not misattributed.
  EXPECT_THROW(pipeline->run(tasks, cands, nullptr, {started[0]}), LeapError);
}

TEST_F(BuiltinSuite, ACandidateWhoseCompileHasFinishedIsNotHeldBehindALongerBuild) {
  // The first candidate's build takes seconds (the compiler evaluates a long constant loop); the
  // second is a cache hit. One judge: it evaluates the second while the first still builds, and
  // the outcomes keep candidate order.
  auto tasks = load_suite("builtin");
  auto fast = load_candidates(test::source_dir() + "/examples/cpu/relu.cpp", Backend::cpu).at(0);
  auto slow = fast;
  slow.name = "relu.slow_build";
  slow.source += R"(
constexpr unsigned long long leap_spin(int rounds) {
  unsigned long long x = 1;
  for (int r = 0; r < rounds; ++r)
    for (int i = 0; i < 200000; ++i) x = x * 6364136223846793005ull + i;
  return x;
}
static_assert(leap_spin(2) != 0, "a build of seconds");
)";
  auto pipeline = make(test::test_config(cache_.path()));
  pipeline->evaluate_in_order(false);  // the product's default
  ASSERT_EQ(pipeline->slot_count(), 1u);
  ASSERT_EQ(pipeline->run(tasks, {fast}).at(0).status, Status::ok);  // its build is now in the cache
  std::vector<std::string> seen;
  auto outcomes = pipeline->run(tasks, {slow, fast}, [&](const EvalOutcome& o) { seen.push_back(o.candidate); });
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0].candidate, slow.name);
  EXPECT_EQ(outcomes[1].candidate, fast.name);
  EXPECT_EQ(outcomes[0].status, Status::ok) << outcomes[0].feedback;
  EXPECT_EQ(outcomes[1].status, Status::ok) << outcomes[1].feedback;
  EXPECT_TRUE(outcomes[1].cache_hit);
  EXPECT_EQ(seen, (std::vector<std::string>{fast.name, slow.name}));
  EXPECT_LT(outcomes[1].stages.eval_start_s, outcomes[0].stages.compile_end_s)
      << "the ready candidate waited for the other's build";
  // In order (the hostile suites: an attack, then the honest candidate it could harm), the ready
  // candidate waits for a build of its own predecessor.
  auto slow2 = slow;
  slow2.name = "relu.slow_build2";
  slow2.source += "static_assert(leap_spin(1) != 1, \"another build\");\n";
  pipeline->evaluate_in_order(true);
  seen.clear();
  outcomes = pipeline->run(tasks, {slow2, fast}, [&](const EvalOutcome& o) { seen.push_back(o.candidate); });
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_FALSE(outcomes[0].cache_hit);
  EXPECT_EQ(seen, (std::vector<std::string>{slow2.name, fast.name}));
  EXPECT_GT(outcomes[1].stages.eval_start_s, outcomes[0].stages.compile_end_s);
}

TEST_F(BuiltinSuite, SpeedupAboveTheBoundIsReverifiedAndFlagged) {
  auto tasks = load_suite("builtin");
  auto cands = load_candidates(test::source_dir() + "/examples/cpu/relu.cpp", Backend::cpu);
  auto cfg = test::test_config(cache_.path());
  cfg.eval.speedup_bound = 1e-6;  // every speedup is "too good"
  auto outcomes = make(cfg)->run(tasks, cands);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].status, Status::ok) << outcomes[0].feedback;
  EXPECT_TRUE(outcomes[0].speedup_flagged);
  // Every verified call is a trial: the correctness trials, the random and last timed ones, and
  // three more verified calls for the implausible speedup.
  EXPECT_EQ(outcomes[0].trials.size(), outcomes[0].verified_calls);
  EXPECT_GE(outcomes[0].verified_calls, cfg.eval.trials + 1 + 3);
  EXPECT_GE(outcomes[0].calls, outcomes[0].verified_calls);
}

// relu done `reps` times over (correct, clearly slower than its reference); from its call
// `wrong_from` on (counted in the runner, one per candidate) every element is off by 1.
std::string slow_relu(int reps, int wrong_from) {
  return R"(#include <leap/candidate.h>
LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out; (void)stream;
  static int calls = 0;
  const float off = ++calls >= )" + std::to_string(wrong_from) + R"( ? 1.0f : 0.0f;
  const float* x = LEAP_DATA(const float, &in[0]);
  float* y = LEAP_DATA(float, &out[0]);
  const int64_t n = leap_numel(&in[0]);
  for (int r = 0; r < )" + std::to_string(reps) + R"(; ++r) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] > 0.0f ? x[i] : 0.0f) + off;
    __asm__ volatile("" ::: "memory");  /* each pass is done, not folded into one */
  }
  return 0;
}
)";
}

// [eval] slow_stop_ratio also cuts the trials before timing to two for a candidate that the second
// trial shows clearly slower than its reference: its verified timed calls carry the rest of the
// correctness check (at least [eval] trials verified calls in all); a wrong one is then a
// wrong_answer. A candidate near its reference, or whose calls are short, keeps every trial.
TEST_F(BuiltinSuite, AClearlySlowCandidatesTimedCallsCarryTheRestOfTheCorrectnessCheck) {
  auto tasks = load_suite("builtin");
  auto fast = load_candidates(test::source_dir() + "/examples/cpu/relu.cpp", Backend::cpu).at(0);
  const CandidateSource slow{"relu", "relu.slow.cpp", slow_relu(100, 1 << 30), "slow"};
  const CandidateSource late{"relu", "relu.wrong-late.cpp", slow_relu(100, 6), "wrong-late"};
  // Calls of ~0.1 s (22 ms a thousand passes on the CI machine): beyond the warm-up's 25 ms (and, with this floor, within the calls' limit).
  const CandidateSource slower{"relu", "relu.slower.cpp", slow_relu(5000, 1 << 30), "slower"};
  auto cfg = test::test_config(cache_.path());
  cfg.eval.slow_stop_ratio = 2;
  cfg.eval.call_limit_floor_ms = 2000;
  auto cut = make(cfg)->run(tasks, {slow, fast, late, slower});
  ASSERT_EQ(cut.size(), 4u);
  EXPECT_EQ(cut[0].status, Status::ok) << cut[0].feedback;
  EXPECT_LT(cut[0].speedup, 0.5) << "the slow candidate is not slow enough for this test";
  EXPECT_EQ(cut[0].trial_calls, 2u);
  EXPECT_EQ(cut[0].trials.size(), cut[0].verified_calls);
  EXPECT_GE(cut[0].verified_calls, cfg.eval.trials);
  EXPECT_EQ(cut[1].status, Status::ok) << cut[1].feedback;
  EXPECT_EQ(cut[1].trial_calls, cfg.eval.trials);  // calls of microseconds: every trial
  EXPECT_EQ(cut[2].status, Status::wrong_answer) << cut[2].feedback;
  EXPECT_EQ(cut[2].trial_calls, 2u);
  EXPECT_NE(cut[2].feedback.find("carried the rest of the correctness check"), std::string::npos) << cut[2].feedback;
  // Warm from its trials: a clearly slow candidate whose calls outlast the warm-up's time gets no
  // warm-up call; one whose calls are short gets the warm-up as before.
  EXPECT_EQ(cut[3].status, Status::ok) << cut[3].feedback;
  EXPECT_EQ(cut[3].trial_calls, 2u);
  EXPECT_GT(cut[3].candidate_timing.median_us, 1000 * cfg.eval.warmup_ms);
  EXPECT_EQ(cut[3].warmup_calls, 0u);
  EXPECT_GT(cut[1].warmup_calls, 0u);

  cfg.eval.slow_stop_ratio = 0;  // off: the trials as before, and a candidate wrong only after them was checked enough
  auto full = make(cfg)->run(tasks, {slow, late});
  ASSERT_EQ(full.size(), 2u);
  EXPECT_EQ(full[0].status, Status::ok) << full[0].feedback;
  EXPECT_EQ(full[0].trial_calls, cfg.eval.trials);
  EXPECT_EQ(full[1].status, Status::cheat_detected) << full[1].feedback;
  EXPECT_EQ(full[1].check, Check::timed_call_wrong);
}

}  // namespace
}  // namespace leap
