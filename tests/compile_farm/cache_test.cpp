#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "common/paths.h"
#include "compile_farm/cache.h"
#include "compile_farm/farm.h"
#include "support/test_util.h"

namespace leap {
namespace {

const char* kRelu = R"(#include <leap/candidate.h>
LEAP_ENTRY int leap_kernel(const DLTensor* in, int, DLTensor* out, int, void*) {
  const float* x = LEAP_DATA(const float, &in[0]);
  float* y = LEAP_DATA(float, &out[0]);
  for (int64_t i = 0; i < leap_numel(&in[0]); ++i) y[i] = x[i] > 0 ? x[i] : 0;
  return 0;
}
)";

TEST(CacheKey, EveryPartChangesTheKey) {
  CacheKeyParts base{"src", "g++ 12", {"-O3"}, "cpu", "abi1"};
  auto k = cache_key(base);
  EXPECT_EQ(k, cache_key(base));
  EXPECT_EQ(k.size(), 64u);
  auto changed = [&](auto mutate) {
    auto p = base;
    mutate(p);
    return cache_key(p) != k;
  };
  EXPECT_TRUE(changed([](auto& p) { p.source += " "; }));
  EXPECT_TRUE(changed([](auto& p) { p.compiler_identity = "g++ 13"; }));
  EXPECT_TRUE(changed([](auto& p) { p.flags.push_back("-g"); }));
  EXPECT_TRUE(changed([](auto& p) { p.flags = {"-O2"}; }));
  EXPECT_TRUE(changed([](auto& p) { p.target = "sm_90"; }));
  EXPECT_TRUE(changed([](auto& p) { p.abi_header = "abi2"; }));
  // Boundaries between parts matter: ("ab", "c") is not ("a", "bc").
  EXPECT_NE(cache_key({"ab", "c", {}, "", ""}), cache_key({"a", "bc", {}, "", ""}));
}

TEST(CompileCache, ConcurrentWritersLeaveOneWholeEntry) {
  test::TempDir dir;
  auto lib = dir.write("built/lib.so", std::string(1 << 20, 'x'));
  const std::string key = std::string(64, 'a');
  std::vector<std::thread> writers;
  for (int i = 0; i < 8; ++i)
    writers.emplace_back([&, i] {
      auto own = dir.write("built" + std::to_string(i) + "/lib.so", std::string(1 << 20, 'x'));
      CompileCache(dir.path() + "/cache").store_library(key, own);
    });
  for (auto& t : writers) t.join();
  CompileCache cache(dir.path() + "/cache");
  auto hit = cache.lookup(key);
  ASSERT_TRUE(hit && hit->ok);
  EXPECT_EQ(std::filesystem::file_size(hit->library_path), 1u << 20);
  for (auto& e : std::filesystem::recursive_directory_iterator(dir.path() + "/cache"))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "staging file left: " << e.path();
  cache.store_failure(std::string(64, 'b'), "error: nope");
  EXPECT_EQ(cache.lookup(std::string(64, 'b'))->diagnostics, "error: nope");
  EXPECT_FALSE(cache.lookup(std::string(64, 'c')).has_value());
}

class FarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
    // A compiler that counts its runs, so a cache hit is seen to cost none.
    counter_ = dir_.path() + "/runs";
    script_ = dir_.write("counting-g++", "#!/bin/sh\ncase \"$1\" in --version) ;; *) echo run >> " + counter_ +
                                             ";; esac\nexec g++ \"$@\"\n");
    ::chmod(script_.c_str(), 0755);
    cfg_.cxx = script_;
    cfg_.sandbox = false;  // the counting script writes beside itself, outside any job folder
    cfg_.cxx_flags = {"-std=c++17", "-O1"};
    cfg_.cache_dir = dir_.path() + "/cache";
    cfg_.jobs = 2;
  }
  int compiler_runs() const {
    if (!std::filesystem::exists(counter_)) return 0;
    int n = 0;
    std::ifstream in(counter_);
    for (std::string l; std::getline(in, l);) n += l == "run";
    return n;
  }
  test::TempDir dir_;
  std::string counter_, script_;
  CompileConfig cfg_;
};

TEST_F(FarmTest, CacheHitRunsNoCompiler) {
  CompileFarm farm(cfg_, make_cxx_driver(cfg_));
  auto first = farm.compile({"relu.cpp", kRelu, Backend::cpu});
  ASSERT_TRUE(first.ok) << first.diagnostics;
  EXPECT_FALSE(first.cache_hit);
  EXPECT_EQ(compiler_runs(), 1);
  auto second = farm.compile({"relu.cpp", kRelu, Backend::cpu});
  EXPECT_TRUE(second.ok);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.library_path, first.library_path);
  EXPECT_EQ(compiler_runs(), 1);
  // A new farm over the same directory (another process) hits too.
  CompileFarm other(cfg_, make_cxx_driver(cfg_));
  EXPECT_TRUE(other.compile({"relu.cpp", kRelu, Backend::cpu}).cache_hit);
  EXPECT_EQ(compiler_runs(), 1);
}

// A relative cache_dir (`leap bench dcp --out runs/x` gives one) is resolved against the working
// directory, not the compiler's job folder: the candidate compiles, in the sandbox too.
TEST_F(FarmTest, ARelativeCacheDirectoryCompiles) {
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_.path());
  CompileConfig c;
  c.cxx_flags = {"-std=c++17", "-O1"};
  c.cache_dir = "relative-cache";
  for (bool sandbox : {false, true}) {
    c.sandbox = sandbox;
    CompileFarm farm(c, make_cxx_driver(c));
    auto r = farm.compile({"relu.cpp", std::string(kRelu) + (sandbox ? "\n// sandboxed\n" : ""), Backend::cpu});
    EXPECT_TRUE(r.ok) << "sandbox " << sandbox << ": " << r.diagnostics;
  }
  std::filesystem::current_path(cwd);
  EXPECT_TRUE(std::filesystem::is_directory(dir_.path() + "/relative-cache"));
}

TEST_F(FarmTest, FailuresAreCachedWithTrimmedDiagnostics) {
  CompileFarm farm(cfg_, make_cxx_driver(cfg_));
  std::string bad = std::string(kRelu) + "int broken( { }\n";
  auto r = farm.compile({"mine.cpp", bad, Backend::cpu});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.diagnostics.find("mine.cpp:8:"), std::string::npos) << r.diagnostics;
  EXPECT_EQ(r.diagnostics.find(dir_.path()), std::string::npos) << "temporary path leaked: " << r.diagnostics;
  auto again = farm.compile({"mine.cpp", bad, Backend::cpu});
  EXPECT_TRUE(again.cache_hit);
  EXPECT_EQ(again.diagnostics, r.diagnostics);
  EXPECT_EQ(compiler_runs(), 1);
}

TEST_F(FarmTest, PoolCompilesInParallelAndTimesOut) {
  CompileFarm farm(cfg_, make_cxx_driver(cfg_));
  std::vector<std::shared_future<CompileResult>> futs;
  for (int i = 0; i < 4; ++i)
    futs.push_back(farm.submit({"c" + std::to_string(i), std::string(kRelu) + "// " + std::to_string(i), Backend::cpu}));
  std::set<std::string> libs;
  for (auto& f : futs) {
    auto r = f.get();
    EXPECT_TRUE(r.ok) << r.diagnostics;
    libs.insert(r.library_path);
  }
  EXPECT_EQ(libs.size(), 4u);

  auto slow = dir_.write("slow-g++", "#!/bin/sh\ncase \"$1\" in --version) exec g++ --version;; esac\nsleep 30\n");
  ::chmod(slow.c_str(), 0755);
  auto cfg = cfg_;
  cfg.cxx = slow;
  cfg.timeout_s = 0.5;
  CompileFarm slow_farm(cfg, make_cxx_driver(cfg));
  auto r = slow_farm.compile({"x.cpp", kRelu, Backend::cpu});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.diagnostics.find("exceeded"), std::string::npos) << r.diagnostics;
  EXPECT_LT(r.compile_us, 10e6);
}


// Compilers run at [compile] nice (with and without their sandbox): a build never takes the CPU
// from a judge or its runners. The compiler here reports its own niceness as its diagnostics.
TEST_F(FarmTest, CompilersRunAtTheConfiguredNiceness) {
  auto telling = dir_.write("telling-g++", "#!/bin/sh\ncase \"$1\" in --version) exec g++ --version;; esac\n"
                                           "echo \"niceness $(nice)\" >&2\nexit 1\n");
  ::chmod(telling.c_str(), 0755);
  const int base = ::getpriority(PRIO_PROCESS, 0);
  for (bool sandbox : {false, true}) {
    for (int nice : {0, 7}) {
      auto cfg = cfg_;
      cfg.cxx = telling;
      cfg.sandbox = sandbox;
      cfg.nice = nice;
      cfg.cache_dir = dir_.path() + "/cache-nice-" + std::to_string(sandbox) + std::to_string(nice);
      CompileFarm farm(cfg, make_cxx_driver(cfg));
      auto r = farm.compile({"x.cpp", kRelu, Backend::cpu});
      EXPECT_FALSE(r.ok);
      EXPECT_NE(r.diagnostics.find("niceness " + std::to_string(std::min(base + nice, 19))), std::string::npos)
          << "sandbox " << sandbox << ", nice " << nice << ": " << r.diagnostics;
    }
  }
}

}  // namespace
}  // namespace leap
