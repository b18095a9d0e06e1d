// `leap run` under real mpirun with 4 ranks (coordinator, learner, 2 workers): launch checks,
// the loop's invariants, identical weights on every rank, resume = uninterrupted, and a worker
// killed mid-run.
#include <gtest/gtest.h>

#include <fstream>
#include <signal.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <thread>

#include "common/paths.h"
#include "common/run_dir.h"
#include "common/subprocess.h"
#include "support/loop_checks.h"
#include "support/test_util.h"

namespace leap {
namespace {

const std::string kMpiConfig = test::loop_config(R"(
[run]
name = "mpi"
tasks = ["relu", "softmax", "gemm_bias_relu", "silu"]
steps = 4
tasks_per_step = 2
checkpoint_every = 2
seed = 11
)",
    // Resume must equal the uninterrupted run, so no verdict may depend on load: this seed samples
    // gemm_bias_relu choices ~140x slower than the reference (16 ms calls), which the default
    // 50 ms floor of the call limit stopped as too slow in one run and not in the other under CI's
    // load. At 150 ms they are far from it; endless candidates still end at the 1 s deadline.
    "call_limit_floor_ms = 150");

class MpiLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
    ::setenv("LEAP_CACHE_DIR", cache().path().c_str(), 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    ::setenv("OMPI_MCA_btl", "self,vader,tcp", 1);
    config_ = dir_.write("test.toml", kMpiConfig);
  }
  static test::TempDir& cache() {
    static test::TempDir d;  // shared by the tests here: warm compiles after the first run
    return d;
  }
  std::vector<std::string> mpirun(int np, std::vector<std::string> args) {
    std::vector<std::string> argv = {LEAP_TEST_MPIEXEC, "-np", std::to_string(np), "--oversubscribe",
                                     test::build_dir() + "/leap", "run"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  CommandResult leap_run(std::vector<std::string> args, int np = 4) { return run_command(mpirun(np, args), 600); }
  test::TempDir dir_;
  std::string config_;
};

TEST_F(MpiLoop, TooFewRanksOrNoPmiStopWithHowToLaunch) {
  auto r = leap_run({"--config", config_, "--run-dir", dir_.path() + "/x"}, 2);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("at least 3 ranks, this launch has 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mpirun -np 4"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/x"));

  // Four tasks started by a scheduler without PMI: each is a singleton believing it is rank 0 of 1.
  ::setenv("SLURM_NTASKS", "4", 1);
  auto s = run_command({test::build_dir() + "/leap", "run", "--config", config_, "--run-dir", dir_.path() + "/y"}, 120);
  ::unsetenv("SLURM_NTASKS");
  EXPECT_EQ(s.exit_code, 2) << s.output;
  EXPECT_NE(s.output.find("SLURM_NTASKS=4 tasks were started but MPI sees a world of 1"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("--mpi=pmix"), std::string::npos) << s.output;
}

// Each rank binds its own loopback address (as if on its own host): a rank that assumed an
// address instead of using the exchanged endpoints would connect to nobody and the run hang.
TEST_F(MpiLoop, RanksOnDistinctAddressesFindEachOtherThroughTheExchange) {
  std::vector<std::string> argv = {LEAP_TEST_MPIEXEC, "--oversubscribe"};
  for (int r = 0; r < 4; ++r) {
    if (r) argv.push_back(":");
    for (const std::string& a : std::vector<std::string>{"-np", "1", "-x", "LEAP_BIND_ADDRESS=127.0.0." + std::to_string(r + 2),
                          test::build_dir() + "/leap", "run", "--config", config_, "--run-dir", dir_.path() + "/addr",
                          "--steps", "1"})
      argv.push_back(a);
  }
  auto r = run_command(argv, 600);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int k = 0; k < 4; ++k)
    EXPECT_NE(r.output.find(std::to_string(k) + "=tcp://127.0.0." + std::to_string(k + 2) + ":"), std::string::npos)
        << r.output;
  EXPECT_EQ(test::read_jsonl(dir_.path() + "/addr/metrics.jsonl").size(), 1u);
  // Rank 0 leaves the run's page behind.
  std::ifstream page(dir_.path() + "/addr/report.html");
  std::string html((std::istreambuf_iterator<char>(page)), {});
  EXPECT_NE(html.find("data-chart=\"worker-timeline\""), std::string::npos) << r.output;
}

TEST_F(MpiLoop, FourRanksKeepInvariantsAndResumeEqualsAnUninterruptedRun) {
  const std::string a = dir_.path() + "/a", b = dir_.path() + "/b";
  auto ra = leap_run({"--config", config_, "--run-dir", a});
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  EXPECT_NE(ra.output.find("step 4/4"), std::string::npos) << ra.output;
  auto rb1 = leap_run({"--config", config_, "--run-dir", b, "--steps", "2"});
  ASSERT_EQ(rb1.exit_code, 0) << rb1.output;
  auto again = leap_run({"--config", config_, "--run-dir", b, "--steps", "2"});
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("--resume"), std::string::npos) << again.output;
  auto rb2 = leap_run({"--config", config_, "--run-dir", b, "--resume"});
  ASSERT_EQ(rb2.exit_code, 0) << rb2.output;
  EXPECT_NE(rb2.output.find("step 3/4"), std::string::npos) << rb2.output;
  EXPECT_EQ(rb2.output.find("step 2/4"), std::string::npos) << "resume reran a completed step\n" << rb2.output;

  test::DcpSeen total;
  for (const auto& d : {a, b}) {
    auto seen = test::check_outcome_invariants(d, 8, 3, 4, 8);
    total.easy += seen.easy;
    total.medium += seen.medium;
    total.hopeless += seen.hopeless;
    auto sums = test::checksums_by_version(d);
    ASSERT_EQ(sums.size(), 4u) << d;  // versions 1 .. 4, one checksum each over the learner and both workers
    for (const auto& [v, s] : sums) {
      EXPECT_EQ(s.size(), 3u) << d << ": version " << v << " not reported by the learner and both workers";
      EXPECT_EQ(std::set<std::string>(s.begin(), s.end()).size(), 1u) << d << ": ranks disagree on weights version " << v;
    }
  }
  EXPECT_GT(total.medium, 0) << "no medium group: refinement turns were not exercised";
  EXPECT_GT(total.easy + total.hopeless, 0) << "no pruned group";

  auto ma = test::read_jsonl(a + "/metrics.jsonl"), mb = test::read_jsonl(b + "/metrics.jsonl");
  ASSERT_EQ(ma.size(), 4u);
  ASSERT_EQ(mb.size(), 4u);
  for (size_t i = 0; i < ma.size(); ++i) {
    EXPECT_EQ(mb[i]["step"], static_cast<int>(i));
    for (const char* k : {"step", "tasks", "solve_at", "dcp", "rewards", "loss", "weights_version", "weights_checksum"})
      EXPECT_EQ(ma[i][k], mb[i][k]) << "step " << i << " differs in " << k;
  }
}

TEST_F(MpiLoop, LmPolicyUnderFourRanksAndItsResumeRegenerateTheSameAnswers) {
  // The tiny random Qwen2 fixture as the policy on every rank (its answers are noise: compile
  // errors); seeded generation makes a resumed run write the same tokens as an uninterrupted one.
  const std::string cfg = dir_.write("lm.toml", test::loop_config(R"(
[run]
name = "mpi-lm"
tasks = ["relu", "silu"]
steps = 2
tasks_per_step = 2
checkpoint_every = 1
seed = 5
[learner]
group_size = 2
max_turns = 2
refine_all_failed = true
)"));
  std::string text = read_file(cfg);
  text.replace(text.find("[policy]\n"), 9, "[policy]\nkind = \"lm\"\nmodel = \"" + test::source_dir() +
                                               "/tests/fixtures/lm/tiny-qwen2\"\nmax_new_tokens = 8\n");
  dir_.write("lm.toml", text);
  const std::string a = dir_.path() + "/lm-a", b = dir_.path() + "/lm-b";
  auto ra = leap_run({"--config", cfg, "--run-dir", a});
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  auto rb1 = leap_run({"--config", cfg, "--run-dir", b, "--steps", "1"});
  ASSERT_EQ(rb1.exit_code, 0) << rb1.output;
  auto rb2 = leap_run({"--config", cfg, "--run-dir", b, "--resume"});
  ASSERT_EQ(rb2.exit_code, 0) << rb2.output;
  for (const auto& d : {a, b}) {
    test::check_outcome_invariants(d, 2, 2, 1, 2, true);
    for (const auto& [v, s] : test::checksums_by_version(d)) {
      EXPECT_EQ(s.size(), 3u) << d << ": version " << v;
      EXPECT_EQ(std::set<std::string>(s.begin(), s.end()).size(), 1u) << d << ": ranks disagree on weights version " << v;
    }
  }
  auto key = [](const nlohmann::json& o) {
    return std::to_string(o["step"].get<int>()) + "/" + o["task"].get<std::string>() + "/" +
           std::to_string(o["rollout"].get<int>()) + "/" + std::to_string(o["turn"].get<int>());
  };
  std::map<std::string, std::string> answers;
  for (const auto& o : test::read_jsonl(a + "/outcomes.jsonl")) answers[key(o)] = o["choice"].get<std::string>() + o["status"].get<std::string>();
  size_t compared = 0;
  for (const auto& o : test::read_jsonl(b + "/outcomes.jsonl")) {
    ASSERT_TRUE(answers.count(key(o))) << key(o);
    EXPECT_EQ(answers[key(o)], o["choice"].get<std::string>() + o["status"].get<std::string>()) << key(o);
    ++compared;
  }
  EXPECT_EQ(compared, answers.size());
  auto ma = test::read_jsonl(a + "/metrics.jsonl"), mb = test::read_jsonl(b + "/metrics.jsonl");
  ASSERT_EQ(ma.size(), 2u);
  ASSERT_EQ(mb.size(), 2u);
  for (size_t i = 0; i < ma.size(); ++i) EXPECT_EQ(ma[i]["weights_checksum"], mb[i]["weights_checksum"]) << "step " << i;
}

TEST_F(MpiLoop, AKilledWorkerStopsTheJobAndResumeCompletesTheRun) {
  const std::string run = dir_.path() + "/kill";
  std::string log_path = dir_.path() + "/mpirun.log";
  int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  SpawnSpec spec;
  // Killed once the first checkpoint (step 2) exists; the resume runs the rest.
  spec.argv = mpirun(4, {"--config", config_, "--run-dir", run, "--steps", "4"});
  spec.stdout_fd = fd;
  spec.stderr_fd = fd;
  ChildProcess job(spec);
  ::close(fd);

  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (!latest_checkpoint(run) && std::chrono::steady_clock::now() < deadline && !job.try_wait())
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(latest_checkpoint(run)) << read_file(log_path);
  std::smatch m;
  std::string worker_log = read_file(run + "/logs/rank-3.log");
  ASSERT_TRUE(std::regex_search(worker_log, m, std::regex("pid (\\d+)"))) << worker_log;
  ASSERT_EQ(::kill(std::stoi(m[1]), SIGKILL), 0);

  std::optional<int> status;
  while (!(status = job.try_wait()) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(status) << "the job kept running after a worker died";
  EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << describe_wait_status(*status);
  std::string out = read_file(log_path);
  EXPECT_TRUE(out.find("rank 3") != std::string::npos && out.find("signal 9") != std::string::npos) << out;

  auto ck = latest_checkpoint(run);
  ASSERT_TRUE(ck);
  EXPECT_LT(ck->step, 4);
  for (const char* f : {"state.json", "policy.pt", "optimizer.pt"})
    EXPECT_TRUE(std::filesystem::exists(ck->dir + "/" + f)) << f;
  auto state = nlohmann::json::parse(read_file(ck->dir + "/state.json"));
  EXPECT_EQ(state["completed_steps"], ck->step);

  auto r = leap_run({"--config", config_, "--run-dir", run, "--steps", "4", "--resume"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto metrics = test::read_jsonl(run + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 4u);
  for (size_t i = 0; i < metrics.size(); ++i) EXPECT_EQ(metrics[i]["step"], static_cast<int>(i));
  test::check_outcome_invariants(run, 8, 3, 4, 8);
}

}  // namespace
}  // namespace leap
