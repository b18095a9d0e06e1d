// The CUDA backend on a real GPU. Skipped, with the reason, where no GPU is visible; run on
// the GPU machine by bench/device/gpu-report.sh.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "common/cores.h"
#include "common/subprocess.h"
#include "support/pipeline_fixture.h"

namespace leap {
namespace {

std::string gpu_absent_reason() {
  CommandResult r;
  try {
    r = run_command({"nvidia-smi", "-L"}, 30);
  } catch (const std::exception& e) {
    return std::string("no NVIDIA GPU visible (") + e.what() + ")";
  }
  if (r.exit_code != 0 || r.output.find("GPU 0") == std::string::npos)
    return "no NVIDIA GPU visible (nvidia-smi -L: " + r.output.substr(0, 120) + ")";
  return "";
}

// With a GPU there, a build without a leap component is a failure, never a skip.
std::string missing_component() {
  for (const char* exe : {"leap-evald", "leap-runner", "leap-nvrtc"})
    if (!std::filesystem::exists(test::build_dir() + "/" + exe)) return std::string(exe) + " is not built";
  return "";
}

class CudaBackend : public test::PipelineTest {
 protected:
  void SetUp() override {
    test::PipelineTest::SetUp();
    if (auto why = gpu_absent_reason(); !why.empty()) GTEST_SKIP() << why;
    if (auto missing = missing_component(); !missing.empty()) GTEST_FAIL() << "a GPU is present but " << missing;
  }
  std::unique_ptr<EvalPipeline> make_cuda(const LeapConfig& cfg) { return make(cfg, Backend::cuda); }
  LeapConfig config() {
    auto cfg = test::test_config(cache_.path());
    cfg.sandbox.deadline_s = 20;
    cfg.eval.timing_budget_ms = 200;
    return cfg;
  }
};

TEST_F(CudaBackend, EveryExampleAndTunedCandidateIsOk) {
  auto tasks = load_suite("builtin");
  auto cands = load_candidates(test::source_dir() + "/examples/cuda", Backend::cuda);
  std::set<std::string> covered;
  for (const auto& c : cands) covered.insert(c.task);
  EXPECT_EQ(covered.size(), tasks.size());
  auto outcomes = make_cuda(config())->run(tasks, cands);
  bool faster = false, slower = false;
  for (const auto& o : outcomes) {
    EXPECT_EQ(o.status, Status::ok) << o.candidate << ": " << o.feedback;
    EXPECT_GT(o.reference_timing.median_us, 0) << o.candidate;
    faster = faster || o.speedup > 1;
    slower = slower || (o.status == Status::ok && o.speedup < 1);
  }
  EXPECT_TRUE(faster) << "no candidate beat the reference";
  EXPECT_TRUE(slower);
}

// [eval] profile: an ok candidate's kernels measured by Nsight Compute after the verdict. The
// elementwise relu streams DRAM; the naive GEMM barely touches it (its operands stay in the caches);
// the verdict and the timing are those of the evaluation without the profile.
TEST_F(CudaBackend, ProfiledCandidatesCarryTheirKernelsCountersAndTheVerdictStands) {
  auto tasks = load_suite("builtin");
  auto relu = load_candidates(test::source_dir() + "/examples/cuda/relu.cu", Backend::cuda);
  auto gemm = load_candidates(test::source_dir() + "/examples/cuda/matmul.cu", Backend::cuda);
  std::vector<CandidateSource> cands = {relu.at(0), gemm.at(0)};
  auto cfg = config();
  auto plain = make_cuda(cfg)->run(tasks, cands);
  cfg.eval.profile = true;
  auto profiled = make_cuda(cfg)->run(tasks, cands);
  ASSERT_EQ(profiled.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& o = profiled[i];
    ASSERT_EQ(o.status, Status::ok) << o.candidate << ": " << o.feedback;
    ASSERT_FALSE(o.kernels.empty()) << o.candidate << ": " << o.profile_error;
    EXPECT_TRUE(o.profile_error.empty()) << o.profile_error;
    EXPECT_GT(o.profile_us, 0);
    EXPECT_GT(o.kernels[0].duration_us, 0);
    EXPECT_NE(o.feedback.find("profile (Nsight Compute"), std::string::npos) << o.feedback;
    EXPECT_FALSE(o.bottleneck.empty());
    // Timing unchanged: the profile runs after it (medians of two evaluations within 15 %).
    EXPECT_NEAR(o.candidate_timing.median_us / plain[i].candidate_timing.median_us, 1.0, 0.15) << o.candidate;
    EXPECT_TRUE(plain[i].kernels.empty());
  }
  EXPECT_GT(profiled[0].kernels[0].dram_pct, 30) << profiled[0].feedback;
  EXPECT_EQ(profiled[0].bottleneck, "memory-bound");
  EXPECT_LT(profiled[1].kernels[0].dram_pct, 10) << profiled[1].feedback;
}

TEST_F(CudaBackend, HostileKernelsGetTheirStatusAndTheNextCandidateIsUnaffected) {
  auto tasks = load_suite("builtin");
  auto hostile = load_candidates(test::source_dir() + "/tests/fixtures/hostile/cuda", Backend::cuda);
  ASSERT_GE(hostile.size(), 19u);
  auto good = load_candidates(test::source_dir() + "/examples/cuda/relu.cu", Backend::cuda).at(0);
  auto run = test::interleave(hostile, good);
  auto cfg = config();
  cfg.sandbox.deadline_s = 10;
  auto pipeline = make_cuda(cfg);
  const EvalOutcome clean = test::clean_run(*pipeline, tasks, good);
  ASSERT_EQ(clean.status, Status::ok) << clean.feedback;
  // After every attack the good candidate is ok and times within 10 % of its clean run.
  test::expect_hostile_outcomes(run, pipeline->run(tasks, run), &clean, 0.10,
                                [&](const auto& again) { return pipeline->run(tasks, again); });
  EXPECT_EQ(pipeline->evaluator_restarts(), 0) << "an attack ended the judge";
}

// KernelBench-format answers with inline CUDA (load_inline through the farm), and the ways they
// cheat or fail on the GPU; the honest answer after each is ok. The NVRTC split builds the plain
// kernels, nvcc the templated one.
TEST_F(CudaBackend, KernelBenchFormatAnswersGetTheirStatus) {
  auto tasks = load_suite("builtin");
  const std::string dir = test::source_dir() + "/tests/fixtures/kernelbench/answers_cuda";
  std::vector<CandidateSource> hostile;
  for (auto& c : load_candidates(dir, Backend::cuda))
    if (c.name != "relu.py") hostile.push_back(c);
  ASSERT_GE(hostile.size(), 9u);
  // The zygote's runners, reached for by a candidate beside them (the CPU fixture, any backend's).
  hostile.push_back(load_candidates(dir + "/../answers/relu.reach_sibling.py", Backend::cuda).at(0));
  auto good = load_candidates(dir + "/relu.py", Backend::cuda).at(0);
  auto cfg = config();
  cfg.sandbox.deadline_s = 30;
  auto run = test::interleave(hostile, good);
  auto pipeline = make_cuda(cfg);
  auto outcomes = pipeline->run(tasks, run);
  test::expect_hostile_outcomes(run, outcomes);
  std::map<std::string, std::string> compiler;
  bool nvrtc = false;  // the honest answer was built through the split (later ones are cache hits)
  for (const auto& o : outcomes) {
    compiler[o.candidate] = o.compiler;
    nvrtc = nvrtc || (o.candidate.rfind("good-after-", 0) == 0 && o.compiler == "python+nvrtc");
  }
  EXPECT_EQ(compiler["relu.templated.py"], "python+nvcc");  // main.cpp and cuda.cu as load_inline builds them
  // The split's host pass with the binding in it (with <torch/extension.h> precompiled; with the
  // lighter prelude), and beside a main.cpp of its own (cpp_sources with a body).
  EXPECT_EQ(compiler["relu.default_stream.py"], "python+nvrtc");
  EXPECT_EQ(compiler["relu.cpp_body.py"], "python+nvrtc");
  EXPECT_TRUE(nvrtc);
  EXPECT_EQ(pipeline->evaluator_restarts(), 0);
}

// A runner spinning on the device's completion is preempted for whole scheduler slices where its
// core is busy (seen on an H100 beside a busy loop per core: honest kernels of 3-6 ms called
// stream escapes). Its wait for a CPU is the machine's, not work outside the stream: the honest
// kernel stays ok, and work left on a side stream is still found under the same load.
TEST_F(CudaBackend, ARunnerHeldOffItsCoreIsNoStreamEscape) {
  auto tasks = load_suite("builtin");
  std::vector<CandidateSource> run = {
      load_candidates(test::source_dir() + "/examples/cuda/batch_norm.cu", Backend::cuda).at(0),
      load_candidates(test::source_dir() + "/tests/fixtures/hostile/cuda/relu.side_stream.cu", Backend::cuda).at(0)};
  auto cfg = config();
  test::compile_first(cfg, run, Backend::cuda);
  std::vector<EvalOutcome> outcomes;
  test::on_a_busy_core(usable_cores().back(), 2, [&] { outcomes = make_cuda(cfg)->run(tasks, run); });
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0].status, Status::ok) << outcomes[0].feedback;
  EXPECT_EQ(outcomes[1].status, Status::cheat_detected) << outcomes[1].feedback;
  EXPECT_EQ(outcomes[1].check, Check::stream_escape) << outcomes[1].feedback;
  // The load was real: by the judge's clock the honest kernel's calls took longer than unloaded
  // (its trial calls 1.38x on an H100, where the judge without the wait taken off called it an escape).
  auto clean = make_cuda(cfg)->run(tasks, {run[0]});
  ASSERT_EQ(clean.at(0).status, Status::ok) << clean[0].feedback;
  ASSERT_GT(outcomes[0].trial_calls, 0u);
  ASSERT_GT(clean[0].trial_calls, 0u);
  EXPECT_GT(outcomes[0].stages.candidate_calls_us / outcomes[0].trial_calls,
            1.2 * clean[0].stages.candidate_calls_us / clean[0].trial_calls);
}

TEST_F(CudaBackend, RepeatedEvaluationsAgree) {
  auto tasks = load_suite("builtin");
  auto one = load_candidates(test::source_dir() + "/examples/cuda/softmax.cu", Backend::cuda).at(0);
  std::vector<CandidateSource> run(10, one);
  auto outcomes = make_cuda(config())->run(tasks, run);
  double sum = 0, sq = 0;
  for (const auto& o : outcomes) {
    ASSERT_EQ(o.status, Status::ok) << o.feedback;
    sum += o.candidate_timing.median_us;
    sq += o.candidate_timing.median_us * o.candidate_timing.median_us;
  }
  double mean = sum / 10, cv = std::sqrt(std::max(0.0, sq / 10 - mean * mean)) / mean;
  RecordProperty("cv", std::to_string(cv));
  EXPECT_LT(cv, 0.03) << "median timings vary by " << 100 * cv << "%";
}

}  // namespace
}  // namespace leap
