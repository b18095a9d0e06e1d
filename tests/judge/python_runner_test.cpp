// Python runners forked from a zygote (one interpreter that has imported PyTorch, in one sandbox
// with its runners): real zygotes and runners (Debian's PyTorch), each a process of its own, their
// ends reported, a zygote that dies replaced.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "common/python.h"
#include "common/subprocess.h"
#include "judge/pool/runner_pool.h"

namespace leap {
namespace {

pid_t parent_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(line.substr(close + 2));
  char state;
  pid_t ppid = -1;
  fields >> state >> ppid;
  return ppid;
}

// Descriptors of `pid` that are GPU device files (a CUDA context's).
int gpu_files(pid_t pid) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    auto target = std::filesystem::read_symlink(e.path(), ec);
    n += !ec && target.string().rfind("/dev/nvidia", 0) == 0;
  }
  return n;
}

class PythonZygote : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      opts_.python = python_with_torch();
    } catch (const std::exception& e) {
      GTEST_SKIP() << e.what();
    }
    opts_.runner_path = LEAP_TEST_BUILD_DIR "/leap-runner";
    opts_.spares = 2;
    opts_.start_timeout_s = 120;
  }
  std::unique_ptr<Runner> take(RunnerPool& pool) {
    std::string why;
    double waited = 0;
    auto r = pool.take(&why, &waited);
    EXPECT_TRUE(r) << why;
    return r;
  }
  RunnerOptions opts_;
};

TEST_F(PythonZygote, EachRunnerIsAProcessOfItsOwnForkedByTheSameZygote) {
  RunnerPool pool(opts_);
  ASSERT_EQ(pool.prime(), 2);
  std::set<pid_t> pids, parents;
  std::vector<std::unique_ptr<Runner>> taken;
  for (int i = 0; i < 4; ++i) {
    auto r = take(pool);
    ASSERT_TRUE(r);
    ASSERT_GT(r->pid(), 0) << "the kernel's stamp of its ready reply gave no pid";
    EXPECT_NE(r->pid(), ::getpid());
    EXPECT_GE(r->threads(), 1);
    pids.insert(r->pid());
    parents.insert(parent_of(r->pid()));
    taken.push_back(std::move(r));
  }
  EXPECT_EQ(pids.size(), 4u);
  EXPECT_EQ(parents.size(), 1u) << "runners forked by more than one zygote";
  for (auto& r : taken) pool.retire(std::move(r));
  EXPECT_TRUE(pool.wait_idle(60)) << pool.lingering();
}

TEST_F(PythonZygote, ARunnersEndIsReportedAndTheZygoteKeepsForking) {
  RunnerPool pool(opts_);
  auto r = take(pool);
  ASSERT_TRUE(r);
  const pid_t pid = r->pid();
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGSEGV);  // as a crash would end it
  EXPECT_EQ(r->how_it_ended(60), "killed by SIGSEGV (Segmentation fault)");
  EXPECT_TRUE(r->exited());
  auto next = take(pool);
  ASSERT_TRUE(next);
  EXPECT_NE(next->pid(), pid);
  next->kill();
  EXPECT_EQ(next->how_it_ended(60), "killed by SIGKILL (Killed)");
}

TEST_F(PythonZygote, AZygoteThatDiesIsStartedAgainAndItsRunnersEnd) {
  opts_.spares = 1;
  RunnerPool pool(opts_);
  auto r = take(pool);
  ASSERT_TRUE(r);
  const pid_t zygote = parent_of(r->pid());
  ASSERT_GT(zygote, 1);
  // The spare started after the take has said it is ready before its zygote dies: a spare the
  // pool must not hand out, though its ready reply is there to read.
  ASSERT_EQ(pool.prime(), 1);
  ::kill(zygote, SIGKILL);
  // Its runners die with it (the spare taken and the one started after it).
  EXPECT_NE(r->how_it_ended(60), "");
  auto next = take(pool);
  ASSERT_TRUE(next);
  const pid_t parent = parent_of(next->pid());
  EXPECT_GT(parent, 1) << "a runner that is gone";
  EXPECT_NE(parent, zygote);
  EXPECT_GE(next->threads(), 1);
}

// On a GPU: the zygote imports and makes Triton's first compile without touching the device (a
// fork after CUDA's initialisation leaves the child no usable CUDA); each runner makes its own
// context. Skipped without a GPU.
TEST_F(PythonZygote, OnTheGpuTheZygoteHoldsNoContextAndEachRunnerItsOwn) {
  CommandResult cap;
  try {
    cap = run_command({"nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader", "-i", "0"}, 30);
  } catch (const std::exception& e) {
    GTEST_SKIP() << "no NVIDIA GPU visible (" << e.what() << ")";
  }
  if (cap.exit_code != 0 || cap.output.find('.') == std::string::npos) GTEST_SKIP() << "no NVIDIA GPU visible";
  opts_.cuda = true;
  opts_.capability = std::stoi(cap.output) * 10 + std::stoi(cap.output.substr(cap.output.find('.') + 1));
  RunnerPool pool(opts_);
  auto a = take(pool), b = take(pool);
  ASSERT_TRUE(a && b);
  const pid_t zygote = parent_of(a->pid());
  EXPECT_EQ(parent_of(b->pid()), zygote);
  EXPECT_EQ(gpu_files(zygote), 0) << "the zygote opened the GPU";
  EXPECT_GT(gpu_files(a->pid()), 0);
  EXPECT_GT(gpu_files(b->pid()), 0);
  EXPECT_EQ(pool.zygote_stderr().find("failed"), std::string::npos) << pool.zygote_stderr();
}

}  // namespace
}  // namespace leap
