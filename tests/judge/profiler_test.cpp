// [eval] profile's reading of Nsight Compute: the fixture is ncu's own --csv output on an H200
// (session 28's probe: an elementwise relu over 16.8M floats and a naive 1024^2 SGEMM).
#include <gtest/gtest.h>

#include "common/paths.h"
#include "judge/device/profiler.h"
#include "support/test_util.h"

namespace leap {
namespace {

TEST(Profiler, ReadsNsightComputesCsvOneProfilePerLaunch) {
  const auto ks = parse_ncu_csv(read_file(test::source_dir() + "/tests/fixtures/ncu/relu-and-naive-gemm.csv"));
  ASSERT_EQ(ks.size(), 2u);
  const KernelProfile& relu = ks[0];
  EXPECT_EQ(relu.kernel, "relu(const float *, float *, int)");  // commas inside a quoted field
  EXPECT_DOUBLE_EQ(relu.duration_us, 53.632);                     // "53,632" ns: a thousands separator
  EXPECT_DOUBLE_EQ(relu.dram_pct, 44.55);
  EXPECT_DOUBLE_EQ(relu.memory_pct, 44.55);
  EXPECT_DOUBLE_EQ(relu.sm_pct, 49.53);
  EXPECT_DOUBLE_EQ(relu.occupancy_pct, 71.56);
  EXPECT_EQ(relu.registers, 16u);
  EXPECT_EQ(relu.shared_bytes, 0u);
  EXPECT_EQ(relu.block, "(256, 1, 1)");
  EXPECT_EQ(relu.grid, "(65536, 1, 1)");
  const KernelProfile& gemm = ks[1];
  EXPECT_DOUBLE_EQ(gemm.duration_us, 548.32);
  EXPECT_DOUBLE_EQ(gemm.dram_pct, 0.32);     // a naive GEMM barely touches DRAM ...
  EXPECT_DOUBLE_EQ(gemm.memory_pct, 92.95);  // ... and saturates the caches
  EXPECT_DOUBLE_EQ(gemm.sm_pct, 61.93);
  EXPECT_EQ(gemm.registers, 32u);
  // The elementwise kernel streams DRAM; the naive GEMM is bound by its cache traffic.
  EXPECT_EQ(bottleneck_of(relu), "memory-bound");
  EXPECT_EQ(bottleneck_of(gemm), "memory-bound");
}

TEST(Profiler, LabelsTheBottleneckFromTheThroughputs) {
  KernelProfile k;
  k.sm_pct = 85;
  k.memory_pct = 30;
  k.dram_pct = 10;
  EXPECT_EQ(bottleneck_of(k), "compute-bound");
  k.memory_pct = 70;  // 0.8 of the SMs' or more
  EXPECT_EQ(bottleneck_of(k), "memory-bound");
  k = {};
  k.sm_pct = 20;
  k.memory_pct = 35;
  k.dram_pct = 30;
  EXPECT_EQ(bottleneck_of(k), "latency-bound");  // neither reaches 40 % of peak
  k.dram_pct = 90;                               // DRAM counts as memory
  EXPECT_EQ(bottleneck_of(k), "memory-bound");
}

TEST(Profiler, SkipsWhatIsNotARowAndBoundsWhatItKeeps) {
  const std::string header =
      "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\","
      "\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";
  auto row = [](const std::string& name, const std::string& metric, const std::string& unit, const std::string& v) {
    return "\"0\",\"1\",\"p\",\"h\",\"" + name + "\",\"1\",\"7\",\"(1, 1, 1)\",\"(1, 1, 1)\",\"0\",\"9.0\",\"s\",\"" +
           metric + "\",\"" + unit + "\",\"" + v + "\"\n";
  };
  const std::string long_name(5000, 'k');
  const std::string text = "==PROF== Connected to process 1\n\"not\",\"a header\"\n" + header +
                           "a line the program printed\n" + row(long_name + "\xff", "gpu__time_duration.sum", "usecond", "2.5") +
                           "\"0\",\"short row\"\n" + row(long_name, "launch__registers_per_thread", "register/thread", "n/a") +
                           row(long_name, "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "12.5");
  const auto ks = parse_ncu_csv(text);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_DOUBLE_EQ(ks[0].duration_us, 2.5);  // microseconds as given
  EXPECT_EQ(ks[0].registers, 0u);            // "n/a": not a number, left out
  EXPECT_DOUBLE_EQ(ks[0].sm_pct, 12.5);
  EXPECT_LE(ks[0].kernel.size(), 130u);
  for (char c : ks[0].kernel) EXPECT_TRUE(c >= 0x20 && c < 0x7f);
  EXPECT_TRUE(parse_ncu_csv("").empty());
  EXPECT_TRUE(parse_ncu_csv("\"ID\",\"Kernel Name\"\n\"0\",\"k\"\n").empty());  // no metric columns
}

TEST(Profiler, FeedbackNamesTheLongestKernelsFirstAndTheBottleneck) {
  std::vector<KernelProfile> ks(5);
  for (size_t i = 0; i < ks.size(); ++i) {
    ks[i].kernel = "k" + std::to_string(i);
    ks[i].duration_us = static_cast<double>(i + 1);
    ks[i].sm_pct = 90;
    ks[i].memory_pct = 20;
  }
  const std::string f = profile_feedback(ks, 3);
  EXPECT_NE(f.find("5 kernel launches, 15.0 us): compute-bound"), std::string::npos) << f;
  EXPECT_LT(f.find("- k4:"), f.find("- k3:"));
  EXPECT_EQ(f.find("- k1:"), std::string::npos) << f;  // beyond the first three
  EXPECT_NE(f.find("2 more"), std::string::npos) << f;
  EXPECT_TRUE(profile_feedback({}).empty());
  // The longest launch decides the profile's bottleneck (the first of equals), wherever it is.
  ks[1].duration_us = 9;
  ks[1].sm_pct = 10;
  ks[1].memory_pct = 95;
  ks[3].duration_us = 9;
  EXPECT_EQ(longest_kernel(ks), &ks[1]);
  EXPECT_NE(profile_feedback(ks, 3).find("): memory-bound\n"), std::string::npos) << profile_feedback(ks, 3);
  EXPECT_EQ(longest_kernel({}), nullptr);
}

}  // namespace
}  // namespace leap
