#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/cores.h"
#include "common/paths.h"
#include "judge/check/anti_hacking.h"
#include "support/pipeline_fixture.h"

namespace leap {
namespace {

std::vector<int> evald_children() {
  std::vector<int> pids;
  DIR* d = ::opendir("/proc");
  while (auto* e = ::readdir(d)) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string comm, state;
    int p = 0, ppid = 0;
    stat >> p >> comm >> state >> ppid;
    if (ppid == ::getpid() && comm.find("leap-evald") != std::string::npos) pids.push_back(pid);
  }
  ::closedir(d);
  return pids;
}

// The example relu with `before` run first in every call; `ms(clock)` (milliseconds on a clock)
// and `calls` (this call's number, from 1) are there for it.
CandidateSource relu_doing(const std::string& name, const std::string& before) {
  CandidateSource c = load_candidates(test::source_dir() + "/examples/cpu/relu.cpp", Backend::cpu).at(0);
  c.name = name;
  c.source = R"(#include <leap/candidate.h>
#include <time.h>
static double ms(clockid_t clock) { timespec t; clock_gettime(clock, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static int calls = 0;
LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out; (void)stream;
  ++calls;
  )" + before + R"(
  const float* x = LEAP_DATA(const float, &in[0]);
  float* y = LEAP_DATA(float, &out[0]);
  for (int64_t i = 0, n = leap_numel(&in[0]); i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
  return 0;
})";
  return c;
}

class HostileSuite : public test::PipelineTest {
 protected:
  // A good candidate first, so the evaluator is warm and only how the endless one ends is measured.
  std::vector<EvalOutcome> good_then_endless(const LeapConfig& cfg) {
    auto c = load_candidates(test::source_dir() + "/examples/cpu/relu.cpp", Backend::cpu);
    c.push_back(
        load_candidates(test::source_dir() + "/tests/fixtures/hostile/cpu/relu.infinite_loop.cpp", Backend::cpu).at(0));
    auto outcomes = make(cfg)->run(load_suite("builtin"), c);
    EXPECT_EQ(outcomes.size(), 2u);
    if (!outcomes.empty()) {
      EXPECT_EQ(outcomes[0].status, Status::ok) << outcomes[0].feedback;
    }
    return outcomes;
  }
};

// A good candidate after an attack times like its clean run, within the issue's 10 % (the test
// runs alone, its candidates compiled beforehand; a good candidate off by more is evaluated once
// more after its attack, see expect_hostile_outcomes). The good candidate is the CPU matmul
// (~0.6 ms a call): relu's ~20 us call varied by up to 33 % between evaluations on the two-core
// CI machine and 70 % on a 16-core host.
constexpr double kCpuTimingTolerance = 0.10;

TEST_F(HostileSuite, EachGetsItsStatusAndAGoodCandidateStillPassesAfter) {
  const char* escapes[] = {"/tmp/leap-hostile-output.txt", "/tmp/leap-hostile-escape.txt"};
  for (auto* f : escapes) std::filesystem::remove(f);

  auto tasks = load_suite("builtin");
  auto hostile = load_candidates(test::source_dir() + "/tests/fixtures/hostile/cpu", Backend::cpu);
  ASSERT_GE(hostile.size(), 40u);
  auto good = load_candidates(test::source_dir() + "/examples/cpu/matmul.cpp", Backend::cpu).at(0);
  auto run = test::interleave(hostile, good);
  auto cfg = test::test_config(cache_.path());
  cfg.eval.min_samples = 20;  // medians steady enough to compare
  test::compile_first(cfg, run, Backend::cpu);  // compilers beside the timed calls would be measured too
  auto pipeline = make(cfg);
  const EvalOutcome clean = test::clean_run(*pipeline, tasks, good);
  ASSERT_EQ(clean.status, Status::ok) << clean.feedback;
  test::expect_hostile_outcomes(run, pipeline->run(tasks, run), &clean, kCpuTimingTolerance,
                                [&](const auto& again) { return pipeline->run(tasks, again); });
  // Candidates run in disposable runners: no attack ends the judge.
  EXPECT_EQ(pipeline->evaluator_restarts(), 0);
  for (auto* f : escapes) EXPECT_FALSE(std::filesystem::exists(f)) << f << " was written by a candidate";
  pipeline.reset();
  EXPECT_TRUE(evald_children().empty()) << "evaluator processes outlived their pipeline";
}

TEST_F(HostileSuite, EvaluatorsStartedDuringOneRunServeTheNext) {
  // Replacements are started while a run's threads are busy; they must outlive those threads.
  auto tasks = load_suite("builtin");
  auto good = load_candidates(test::source_dir() + "/examples/cpu/relu.cpp", Backend::cpu).at(0);
  auto crash = load_candidates(test::source_dir() + "/tests/fixtures/hostile/cpu/relu.segfault.cpp", Backend::cpu).at(0);
  auto pipeline = make(test::test_config(cache_.path()));
  for (int round = 0; round < 2; ++round) {
    // Two crashes: the evaluator that serves `good` was started by this run's thread.
    auto first = pipeline->run(tasks, {crash, crash, good});
    ASSERT_EQ(first.size(), 3u);
    EXPECT_EQ(first[0].status, Status::runtime_error) << first[0].feedback;
    EXPECT_EQ(first[1].status, Status::runtime_error) << first[1].feedback;
    EXPECT_EQ(first[2].status, Status::ok) << first[2].feedback;
    auto next = pipeline->run(tasks, {good});
    ASSERT_EQ(next.size(), 1u);
    EXPECT_EQ(next[0].status, Status::ok) << "round " << round << ": " << next[0].feedback;
  }
}

TEST_F(HostileSuite, TimeoutIsEnforcedWithinTheDeadline) {
  auto cfg = test::test_config(cache_.path());
  cfg.sandbox.deadline_s = 1;
  cfg.eval.call_limit_ratio = 0;  // the absolute deadline alone
  auto outcomes = good_then_endless(cfg);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[1].status, Status::timeout);
  EXPECT_EQ(outcomes[1].check, Check::none);
  EXPECT_GE(outcomes[1].stages.eval_us, 1.0e6);
  EXPECT_LT(outcomes[1].stages.eval_us, 1.5e6);
}

// The deadline is the candidate's time (its load and calls), not the judge's: 300 trials of relu
// cost the judge seconds of its own work (fresh inputs, the reference, the comparisons) and relu
// tens of milliseconds, so relu is ok at a 0.5 s deadline; an endless call still ends at it.
TEST_F(HostileSuite, TheDeadlineCountsTheCandidatesTimeNotTheJudges) {
  auto cfg = test::test_config(cache_.path());
  cfg.sandbox.deadline_s = 0.5;
  cfg.eval.trials = 300;
  cfg.eval.call_limit_ratio = 0;  // the deadline alone
  auto outcomes = good_then_endless(cfg);  // relu ok
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0].status, Status::ok) << outcomes[0].feedback;
  EXPECT_EQ(outcomes[0].trial_calls, 300u) << outcomes[0].feedback;
  // What makes the test say something: the judge's own work alone is longer than the deadline.
  EXPECT_GT(outcomes[0].stages.correctness_us - outcomes[0].stages.candidate_calls_us, 1.0e6);
  EXPECT_EQ(outcomes[1].status, Status::timeout);
  EXPECT_NE(outcomes[1].feedback.find("the evaluation's 0.5 s deadline"), std::string::npos) << outcomes[1].feedback;
  EXPECT_LT(outcomes[1].stages.eval_us, 2.0e6);
}

// The first call's budget is the deadline (an honest first call may autotune for seconds): an
// endless one is too slow once the deadline is reached, not sooner.
TEST_F(HostileSuite, AnEndlessFirstCallIsTooSlowAtTheDeadline) {
  auto cfg = test::test_config(cache_.path());
  cfg.sandbox.deadline_s = 2;
  cfg.eval.call_limit_floor_ms = 100;  // relu's reference takes microseconds: the floor binds
  auto outcomes = good_then_endless(cfg);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[1].status, Status::timeout);
  EXPECT_EQ(outcomes[1].check, Check::too_slow) << outcomes[1].feedback;
  EXPECT_NE(outcomes[1].feedback.find("call 1 did not end within the evaluation's 2 s deadline"), std::string::npos)
      << outcomes[1].feedback;
  EXPECT_GE(outcomes[1].stages.eval_us, 2.0e6);
  EXPECT_LT(outcomes[1].stages.eval_us, 3.5e6);
}

// Calls after the first: one over the limit is forgiven (an honest call can stall); when most are
// over it, the evaluation ends long before the deadline.
TEST_F(HostileSuite, LaterCallsFarSlowerThanTheReferenceAreStoppedEarly) {
  auto cfg = test::test_config(cache_.path());
  cfg.sandbox.deadline_s = 20;
  cfg.eval.call_limit_floor_ms = 100;  // relu's reference takes microseconds: the floor binds
  auto relu = load_candidates(test::source_dir() + "/examples/cpu/relu.cpp", Backend::cpu).at(0);
  // Spins 150 ms on the calls `slow` picks (numbered from 1), relu otherwise.
  auto spinning = [&](const std::string& name, const std::string& slow) {
    return relu_doing(name, "if (" + slow +
                                ") { const double t0 = ms(CLOCK_MONOTONIC); while (ms(CLOCK_MONOTONIC) - t0 < 150) {} }");
  };
  auto outcomes = make(cfg)->run(load_suite("builtin"),
                                 {relu, spinning("relu.slow_after_first.cpp", "calls >= 2"),
                                  spinning("relu.stalls.cpp", "calls == 3 || calls == 5")});
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[1].status, Status::timeout) << outcomes[1].feedback;
  EXPECT_EQ(outcomes[1].check, Check::too_slow) << outcomes[1].feedback;
  EXPECT_NE(outcomes[1].feedback.find("; 2 of calls 2-3 took longer than their limit of 100.0 ms = max(100 x reference "),
            std::string::npos)
      << outcomes[1].feedback;
  EXPECT_EQ(outcomes[1].calls, 3u);  // no call more than the verdict needs
  EXPECT_LT(outcomes[1].stages.eval_us, 2.0e6);  // not the 20 s deadline
  EXPECT_EQ(outcomes[2].status, Status::ok) << outcomes[2].feedback;
}

// Verdicts do not depend on the machine's load. The judge and its runners share one core with three
// spinning threads: a call needing 20 ms of CPU takes longer than its 30 ms limit by the wall clock
// there and stays ok; a call that sleeps 60 ms is too slow all the same.
TEST_F(HostileSuite, ACallHeldBackByTheMachinesLoadIsNotTooSlow) {
  auto cfg = test::test_config(cache_.path());
  cfg.sandbox.deadline_s = 60;
  cfg.eval.call_limit_floor_ms = 30;  // relu's reference takes microseconds: the floor binds
  const std::vector<CandidateSource> run = {
      relu_doing("relu.needs_20ms_of_cpu.cpp",
           "const double t0 = ms(CLOCK_THREAD_CPUTIME_ID); while (ms(CLOCK_THREAD_CPUTIME_ID) - t0 < 20) {}"),
      relu_doing("relu.sleeps_60ms.cpp", "timespec d{0, 60000000}; nanosleep(&d, nullptr);")};
  test::compile_first(cfg, run, Backend::cpu);  // the compilers are not what this test loads the core with
  // Not the first core: the evaluator keeps to the cores it is given.
  std::vector<EvalOutcome> outcomes;
  test::on_a_busy_core(usable_cores().back(), 3, [&] { outcomes = make(cfg)->run(load_suite("builtin"), run); });
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0].status, Status::ok) << outcomes[0].feedback;
  // The load was real: its correctness calls took longer than the limit by the wall clock.
  // (Trials before timing: 2 of them, this candidate being far slower than relu's reference.)
  ASSERT_GT(outcomes[0].trial_calls, 0u);
  EXPECT_GT(outcomes[0].stages.candidate_calls_us / outcomes[0].trial_calls, 30e3) << outcomes[0].stages.candidate_calls_us;
  EXPECT_EQ(outcomes[1].status, Status::timeout) << outcomes[1].feedback;
  EXPECT_EQ(outcomes[1].check, Check::too_slow) << outcomes[1].feedback;
}

// No vendor library, however dlopen is reached: the runner's filesystem holds only its own
// libraries. The same candidate with the host's whole /usr in view (no namespaces) loads one and is
// ok, so the attack is real and only the runner's view stops it.
TEST_F(HostileSuite, ALibraryOutsideTheRunnersOwnIsNotLoadableByAnyPath) {
  auto c = load_candidates(test::source_dir() + "/tests/fixtures/hostile/cpu/relu.hidden_dlopen.cpp", Backend::cpu);
  auto cfg = test::test_config(cache_.path());
  auto jailed = make(cfg)->run(load_suite("builtin"), c);
  cfg.sandbox.namespaces = false;
  auto open = make(cfg)->run(load_suite("builtin"), c);
  ASSERT_EQ(jailed.size(), 1u);
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].status, Status::ok) << "the attack does not load a library even with /usr in view: "
                                        << open[0].feedback;
  EXPECT_EQ(jailed[0].status, Status::runtime_error) << jailed[0].feedback;
  EXPECT_NE(jailed[0].feedback.find("error code 7"), std::string::npos) << jailed[0].feedback;
}

// Nothing survives a candidate: one answers correctly but writes -0.0 (a mark no tolerance sees)
// where relu gives zero; the next candidate on the same evaluator reads, on its first call, the
// second slot's output (which no call of its own has filled yet) and fails with error code 9 if
// the mark is there.
TEST_F(HostileSuite, NothingACandidateWroteReachesTheNext) {
  auto relu = [](const std::string& name, const std::string& zero, const std::string& look) {
    CandidateSource c = load_candidates(test::source_dir() + "/examples/cpu/relu.cpp", Backend::cpu).at(0);
    c.name = name;
    c.source = R"(#include <leap/candidate.h>
#include <string.h>
static int calls = 0;
LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out; (void)stream;
  const float* x = LEAP_DATA(const float, &in[0]);
  float* y = LEAP_DATA(float, &out[0]);
  const int64_t n = leap_numel(&in[0]);
  if (++calls == 1) {
    // The second slot's output: the slots hold x then y, the same size, one after the other.
    const unsigned* next = (const unsigned*)((const char*)y + 2 * ((const char*)y - (const char*)x));
    int64_t marks = 0;
    for (int64_t i = 0; i < n; ++i) marks += next[i] == 0x80000000u;
    )" + look + R"(
  }
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : )" + zero + R"(;
  return 0;
})";
    return c;
  };
  const std::vector<CandidateSource> run = {relu("relu.marks_its_zeros.cpp", "-0.0f", "(void)marks;"),
                                            relu("relu.looks_for_marks.cpp", "0.0f", "if (4 * marks > n) return 9;")};
  auto cfg = test::test_config(cache_.path());
  auto outcomes = make(cfg)->run(load_suite("builtin"), run);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0].status, Status::ok) << outcomes[0].feedback;
  EXPECT_EQ(outcomes[1].status, Status::ok) << outcomes[1].feedback;
}

// A fixture reaches the runner (the attack it stands for is tried there) unless the import check is
// the verdict it expects: a helper call the check refuses would make it test nothing else.
TEST_F(HostileSuite, EveryFixtureMeetsTheImportCheckItExpects) {
  for (Backend backend : {Backend::cpu, Backend::cuda}) {
    auto cands = load_candidates(test::source_dir() + "/tests/fixtures/hostile/" + to_string(backend), backend);
    ASSERT_GE(cands.size(), 10u);
    std::vector<CompileResult> built;
    try {
      built = test::compile_first(test::test_config(cache_.path()), cands, backend);
    } catch (const std::exception& e) {
      std::cout << "no " << to_string(backend) << " compiler here: " << e.what() << "\n";
      continue;
    }
    for (size_t i = 0; i < cands.size(); ++i) {
      const CompileResult& r = built[i];
      if (!r.ok) continue;  // the compile-error fixtures
      auto exp = test::expectations_of(cands[i]);
      bool expected = std::any_of(exp.begin(), exp.end(), [](const auto& e) { return e.check == Check::forbidden_import; });
      EvalOutcome o;
      bool allowed = imports_allowed(r.library_path, o);
      EXPECT_EQ(!allowed, expected) << cands[i].name << ": " << o.feedback;
    }
  }
}

// A crashed candidate's feedback names the signal and the call.
TEST_F(HostileSuite, ACrashNamesItsSignal) {
  std::vector<CandidateSource> run;
  for (const char* f : {"relu.segfault.cpp", "relu.abort.cpp"})
    run.push_back(load_candidates(test::source_dir() + "/tests/fixtures/hostile/cpu/" + f, Backend::cpu).at(0));
  auto outcomes = make(test::test_config(cache_.path()))->run(load_suite("builtin"), run);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_NE(outcomes[0].feedback.find("ended during call 1, killed by SIGSEGV (Segmentation fault)"), std::string::npos)
      << outcomes[0].feedback;
  EXPECT_NE(outcomes[1].feedback.find("killed by SIGABRT (Aborted)"), std::string::npos) << outcomes[1].feedback;
}

}  // namespace
}  // namespace leap
