// Judges sharing a GPU take turns to time: real flock locks on files, one GpuLock per judge
// (each holds its own open files, as separate processes do).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/bwrap.h"
#include "common/python.h"
#include "common/subprocess.h"
#include "judge/device/gpu_lock.h"
#include "judge/pool/runner_pool.h"

namespace leap {
namespace {

using namespace std::chrono_literals;

class GpuLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("leap-gpu-lock-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "gpu").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void note(const std::string& what) {
    std::lock_guard<std::mutex> g(mu_);
    order_.push_back(what);
  }
  std::filesystem::path dir_;
  std::string path_;
  std::mutex mu_;
  std::vector<std::string> order_;
};

TEST_F(GpuLockTest, UntimedWorkOverlapsAndTimingWaitsForIt) {
  GpuLock a(path_), b(path_), timer(path_);
  a.shared();
  b.shared();  // two judges' untimed work at once: no wait
  std::thread t([&] {
    timer.exclusive();
    note("timing");
    timer.release();
  });
  std::this_thread::sleep_for(100ms);
  note("a done");
  a.release();
  std::this_thread::sleep_for(100ms);
  note("b done");
  b.release();
  t.join();
  EXPECT_EQ(order_, (std::vector<std::string>{"a done", "b done", "timing"}));
  EXPECT_GE(timer.take_waited_us(), 150e3);  // it waited for both holders
  EXPECT_EQ(timer.take_waited_us(), 0);      // and the count restarts
}

TEST_F(GpuLockTest, AJudgeWaitingToTimeGoesBeforeLaterUntimedWork) {
  GpuLock holder(path_), timer(path_), late(path_);
  holder.shared();
  std::thread t([&] {
    timer.exclusive();
    note("timing");
    std::this_thread::sleep_for(100ms);
    timer.shared();  // back to untimed work: through the gate like everyone else
    note("timer untimed");
    timer.release();
  });
  std::this_thread::sleep_for(100ms);  // the timer now holds the gate, waiting for `holder`
  std::thread u([&] {
    late.shared();
    note("late untimed");
    late.release();
  });
  std::this_thread::sleep_for(100ms);
  note("holder done");
  holder.release();
  t.join();
  u.join();
  ASSERT_EQ(order_.size(), 4u);
  EXPECT_EQ(order_[0], "holder done");
  EXPECT_EQ(order_[1], "timing");  // not starved by the untimed work that came later
  EXPECT_GE(late.take_waited_us(), 150e3);
}

TEST_F(GpuLockTest, SwitchingBetweenTimedAndUntimedNeverDeadlocks) {
  // Two judges alternating untimed work and timing as fast as they can: each holds at most the
  // gate while it waits for the lock, so neither can wait for the other forever.
  std::atomic<int> timed{0};
  std::atomic<bool> inside{false}, overlap{false};
  auto judge = [&] {
    GpuLock l(path_);
    for (int i = 0; i < 300; ++i) {
      l.shared();
      l.exclusive();
      if (inside.exchange(true)) overlap = true;  // two judges timing at once
      ++timed;
      inside = false;
      l.shared();
      l.release();
    }
  };
  std::thread x(judge), y(judge);
  x.join();
  y.join();
  EXPECT_EQ(timed.load(), 600);
  EXPECT_FALSE(overlap.load());
}

TEST_F(GpuLockTest, ATimingHoldEndsWithItsScopeHoweverTheTimingEnded) {
  GpuLock judge(path_), other(path_);
  judge.shared();
  auto time_and_fail = [&] {
    GpuLock::Timing timing(judge);
    throw std::runtime_error("the runner died while timed");
  };
  EXPECT_THROW(time_and_fail(), std::runtime_error);
  // Back to shared: another judge's untimed work goes ahead without waiting.
  other.shared();
  EXPECT_LT(other.take_waited_us(), 50e3);
  other.release();
  judge.release();
}

TEST_F(GpuLockTest, NoLockOnTheCpuAndAPathPerGpu) {
  GpuLock none;
  none.shared();
  none.exclusive();
  none.release();
  EXPECT_FALSE(none.enabled());
  ::setenv("LEAP_LOCK_DIR", dir_.c_str(), 1);
  EXPECT_EQ(gpu_lock_path("00000000:3B:00.0"), dir_.string() + "/leap-gpu-00000000-3B-00-0");
  ::unsetenv("LEAP_LOCK_DIR");
  EXPECT_EQ(gpu_lock_path("0000:3b:00.0"), "/tmp/leap-gpu-0000-3b-00-0");
  EXPECT_THROW(GpuLock((dir_ / "missing" / "gpu").string()), std::exception);  // a clear error, not a silent no-lock
}

TEST_F(GpuLockTest, ARunnerStartsOnlyWhileNoJudgeTimesAndKeepsNoHold) {
  // A real runner (CPU backend, in its sandbox) given the lock: its start (where a CUDA runner
  // creates its context) waits while a judge times, and a judge can time while it lives.
  RunnerOptions opts;
  opts.runner_path = LEAP_TEST_BUILD_DIR "/leap-runner";
  opts.spares = 1;
  opts.start_timeout_s = 20;
  opts.gpu_lock = path_;
  GpuLock judge(path_);
  judge.exclusive();
  RunnerPool pool(opts);
  std::this_thread::sleep_for(700ms);
  EXPECT_EQ(pool.idle_spare(), nullptr) << "the runner started while a judge timed";
  judge.release();
  EXPECT_EQ(pool.prime(), 1);
  // Its start as it reports it: the 700 ms of waiting for the timing judge, and the start itself apart.
  ASSERT_NE(pool.idle_spare(), nullptr);
  EXPECT_GE(pool.idle_spare()->start_us, 600e3);
  EXPECT_LT(pool.idle_spare()->made_us, pool.idle_spare()->start_us - 500e3);
  judge.exclusive();  // the live runner holds nothing
  EXPECT_LT(judge.take_waited_us(), 100e3);
  judge.release();
}

TEST_F(GpuLockTest, AsManySparesStartDuringUntimedWorkAsFitInIt) {
  // Batches (refill_below): a taken spare is not replaced at once; the judge's long untimed work
  // replaces it, short work does not. A spare held back by a timing judge is "starting".
  RunnerOptions opts;
  opts.runner_path = LEAP_TEST_BUILD_DIR "/leap-runner";
  opts.spares = 3;
  opts.refill_below = 1;
  opts.start_timeout_s = 20;
  opts.gpu_lock = path_;
  RunnerPool pool(opts);
  ASSERT_EQ(pool.prime(), 3);
  EXPECT_FALSE(pool.starting());
  const double cost = pool.start_cost_ms();
  EXPECT_GT(cost, 0);
  std::string why;
  double waited = 0;
  auto a = pool.take(&why, &waited), b = pool.take(&why, &waited);
  ASSERT_TRUE(a && b) << why;
  ASSERT_EQ(pool.spares(), 1u) << "a batch pool replaces a taken spare only below refill_below";
  GpuLock judge(path_);
  judge.exclusive();               // a spare started now cannot make its context
  pool.refill_during(0.5 * cost);  // shorter than one start: nothing starts
  EXPECT_EQ(pool.spares(), 1u);
  EXPECT_FALSE(pool.starting());
  pool.refill_during(1.5 * cost);  // room for one
  EXPECT_EQ(pool.spares(), 2u);
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(pool.starting()) << "held back by the timing judge";
  pool.refill_during(60e3);        // a minute: every missing one
  EXPECT_EQ(pool.spares(), 3u);
  judge.release();
  EXPECT_EQ(pool.prime(), 3);
  EXPECT_FALSE(pool.starting());
  pool.refill_during(60e3);        // all there: nothing more
  EXPECT_EQ(pool.spares(), 3u);
  pool.retire(std::move(a));
  pool.retire(std::move(b));
}

TEST_F(GpuLockTest, APythonRunnerImportsPyTorchWhileAJudgeTimes) {
  // Importing PyTorch is seconds of CPU work that touches no device: it goes on while a judge
  // times (a judge waited most of every Python spare's start when the hold spanned the import),
  // in a runner of its own or in the zygote the runners fork from. A forked runner's start (where
  // a CUDA runner makes its context) takes the hold like any runner's.
  std::string python;
  try {
    python = python_with_torch();
  } catch (const std::exception& e) {
    GTEST_SKIP() << e.what();
  }
  for (bool zygote : {false, true}) {
    SCOPED_TRACE(zygote ? "forked from a zygote" : "a runner of its own");
    RunnerOptions opts;
    opts.runner_path = LEAP_TEST_BUILD_DIR "/leap-runner";
    opts.python = python;
    opts.zygote = zygote;
    opts.spares = 1;
    opts.start_timeout_s = 120;
    opts.gpu_lock = path_;
    // A judge times now and again (50 ms in every 100) while the first spare starts (the view of
    // what its imports need, then the import): its longest wait is the longest hold taken.
    std::atomic<bool> done{false};
    double longest_us = 0;
    std::thread judge_thread([&] {
      GpuLock judge(path_);
      while (!done) {
        judge.exclusive();
        longest_us = std::max(longest_us, judge.take_waited_us());
        std::this_thread::sleep_for(50ms);
        judge.release();
        std::this_thread::sleep_for(50ms);
      }
    });
    const auto t0 = std::chrono::steady_clock::now();
    RunnerPool pool(opts);
    const int ready = pool.prime();
    const double start_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    done = true;
    judge_thread.join();
    ASSERT_EQ(ready, 1);
    EXPECT_LT(longest_us, 0.5 * start_us) << "a judge waited " << longest_us / 1e3 << " ms of the first spare's "
                                          << start_us / 1e3 << " ms start";
    std::string why;
    double unused = 0;
    auto first = pool.take(&why, &unused);
    ASSERT_TRUE(first) << why;
    GpuLock judge(path_);
    judge.exclusive();
    pool.replenish();
    std::this_thread::sleep_for(700ms);
    EXPECT_EQ(pool.idle_spare(), nullptr) << "a runner finished its start while a judge timed";
    judge.release();
    EXPECT_EQ(pool.prime(), 1);
    pool.retire(std::move(first));
  }
}

// A runner's view of the filesystem: the files it is given, by every name the loader may use (a
// versioned library behind a link, a folder reached through a link, all under /tmp, which the
// sandbox replaces with its own), and nothing else.
TEST(RunnerView, HoldsTheGivenFilesByEveryNameAndNothingElse) {
  namespace fs = std::filesystem;
  if (::access("/usr/bin/bwrap", X_OK) != 0) GTEST_SKIP() << "no bubblewrap";
  char tmpl[] = "/tmp/leap-view-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl;
  fs::create_directories(dir / "lib");
  { std::ofstream(dir / "lib" / "libfoo.so.1.0") << "foo"; }
  { std::ofstream(dir / "lib" / "libbar.so") << "bar"; }
  { std::ofstream(dir / "lib" / "libhidden.so") << "hidden"; }
  fs::create_symlink("libfoo.so.1.0", dir / "lib" / "libfoo.so.1");
  fs::create_symlink("lib", dir / "linked");
  std::vector<std::string> files = runner_libraries("/usr/bin/cat", false);
  files.push_back("/usr/bin/cat");
  files.push_back((dir / "lib" / "libfoo.so.1").string());
  files.push_back((dir / "linked" / "libbar.so").string());
  auto cat = [&](const std::string& path) {
    std::vector<std::string> argv = bwrap_files_only("bwrap", files);
    argv.insert(argv.end(), {"--", "/usr/bin/cat", path});
    return run_command(argv, 30);
  };
  for (auto [path, want] : std::vector<std::pair<std::string, std::string>>{
           {"lib/libfoo.so.1", "foo"}, {"lib/libfoo.so.1.0", "foo"}, {"linked/libbar.so", "bar"}, {"lib/libbar.so", "bar"}}) {
    auto r = cat((dir / path).string());
    EXPECT_EQ(r.exit_code, 0) << path << ": " << r.output;
    EXPECT_EQ(r.output, want) << path;
  }
  EXPECT_NE(cat((dir / "lib" / "libhidden.so").string()).exit_code, 0);
  EXPECT_NE(cat("/etc/passwd").exit_code, 0);
  fs::remove_all(dir);
}

// A candidate links libm and the C++ runtime even where the runner does not (a runner built
// without them: `true` links the C library alone).
TEST(RunnerView, HoldsTheRuntimesACandidateLinks) {
  std::set<std::string> names;
  for (const auto& p : runner_libraries("/usr/bin/true", false)) names.insert(std::filesystem::path(p).filename());
  for (const char* soname : {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1"})
    EXPECT_TRUE(names.count(soname)) << soname;
}

}  // namespace
}  // namespace leap
