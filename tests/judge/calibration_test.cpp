// The calibration alone: the overhead from trusted calls, each timed call's sample, the allowance,
// and the escape check on calls as the judge observes them (no runner).
#include <gtest/gtest.h>

#include "judge/timing/calibration.h"

namespace leap {
namespace {

Calibration calibrated(bool gpu, double overhead_us, bool python = false) {
  EvalConfig e;  // timing_slack 0.10, timing_slack_us 0 (the device's floor)
  Calibration c(e, gpu, python);
  for (double d : {-4.0, 0.0, 4.0, 2.0, -2.0}) c.add_before_load(overhead_us + d, 0);
  return c;
}

TEST(Calibration, TheOverheadIsTheMedianOfTheTrustedCallsAndLiveOnesReplaceItAtTheCheck) {
  Calibration c = calibrated(true, 40);
  EXPECT_DOUBLE_EQ(c.overhead_us(), 40);
  for (int i = 0; i < 10; ++i) c.add_call(1040, 1000, 0);
  double excess = -1;
  EXPECT_FALSE(c.check(&excess));  // two live calibrations are too few: the overhead before the load
  EXPECT_DOUBLE_EQ(c.overhead_us(), 40);
  EXPECT_NEAR(excess, 0, 1e-9);
  for (double x : {70.0, 80.0, 90.0}) c.add_live(x, 0);
  EXPECT_FALSE(c.check(&excess));
  EXPECT_DOUBLE_EQ(c.overhead_us(), 80);  // the machine's load now, on spares
  EXPECT_NEAR(excess, -40, 1e-9);
}

TEST(Calibration, ACallsSampleIsBoundedByWhatTheJudgeObserved) {
  Calibration cpu = calibrated(false, 30);
  // CPU: the kernel's account less the overhead, whatever the runner reports.
  EXPECT_DOUBLE_EQ(cpu.add_call(530, 1, 0), 500);
  EXPECT_DOUBLE_EQ(cpu.add_call(10, 1, 0), 0);
  Calibration gpu = calibrated(true, 30);
  // GPU: the runner's events, unless they claim less than the judge's clock allows.
  EXPECT_DOUBLE_EQ(gpu.add_call(1030, 1000, 0), 1000);
  // A forged 100 us report of a call the judge saw take 1000 us: at most the allowance (50 us) off.
  EXPECT_DOUBLE_EQ(gpu.add_call(1030, 100, 0), 950);
}

TEST(Calibration, TheAllowanceIsTheSlackOrTheDevicesFloor) {
  EvalConfig e;
  EXPECT_DOUBLE_EQ(Calibration(e, true, false).allowed_excess_us(100), 50);      // GPU floor
  EXPECT_DOUBLE_EQ(Calibration(e, true, false).allowed_excess_us(10000), 1000);  // 10 %
  EXPECT_DOUBLE_EQ(Calibration(e, false, false).allowed_excess_us(10), 20);      // CPU floor
  EXPECT_DOUBLE_EQ(Calibration(e, false, true).allowed_excess_us(10), 120);      // a Python runner's wake-up
  EXPECT_DOUBLE_EQ(Calibration(e, false, false).allowed_excess_us(500), 500);    // CPU: at least the report
  e.timing_slack_us = 7;
  EXPECT_DOUBLE_EQ(Calibration(e, true, false).allowed_excess_us(10), 7);
}

TEST(Calibration, WorkOutsideTheStreamIsAnEscapeOnTheGpuAndAForgedTimingOnTheCpu) {
  Calibration gpu = calibrated(true, 40);
  for (int i = 0; i < 10; ++i) gpu.add_call(1000 + 40 + 300, 1000, 0);  // 300 us on every call beyond the stream
  double excess = 0;
  auto v = gpu.check(&excess);
  ASSERT_TRUE(v);
  EXPECT_NEAR(excess, 300, 1e-9);
  EXPECT_EQ(v->status, Status::cheat_detected);
  EXPECT_EQ(v->check, Check::stream_escape);
  EXPECT_NE(v->feedback.find("the judge observed 300.0 us per call more than the 1000.0 us"), std::string::npos)
      << v->feedback;
  EXPECT_NE(v->feedback.find(" 340/0,"), std::string::npos);  // each call as measured (over its report)

  Calibration cpu = calibrated(false, 10);
  for (int i = 0; i < 10; ++i) cpu.add_call(2000 + 10, 200, 0);  // reports a tenth of its CPU time
  v = cpu.check(&excess);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->check, Check::timing_forged);
  // An honest CPU call, its CPU time inflated by load by a third, is within the allowance.
  Calibration loaded = calibrated(false, 10);
  for (int i = 0; i < 10; ++i) loaded.add_call(1333 + 10, 1000, 0);
  EXPECT_FALSE(loaded.check(&excess));
}

TEST(Calibration, CallsThatWaitedForACpuAreLeftOutWhileMostDidNot) {
  Calibration c = calibrated(true, 40);
  // Three of ten calls were preempted for 2 ms while their kernel ran: left out, the rest honest.
  for (int i = 0; i < 10; ++i) c.add_call(1040 + (i % 3 == 0 && i < 9 ? 2000 : 0), 1000, i % 3 == 0 && i < 9 ? 2000 : 0);
  double excess = -1;
  EXPECT_FALSE(c.check(&excess));
  EXPECT_NEAR(excess, 0, 1e-9);
  // restart() drops the calls: the paired re-measurement replaces them.
  c.restart();
  EXPECT_TRUE(c.observed().empty());
  for (int i = 0; i < 10; ++i) c.add_call(1040 + 500, 1000, 0);
  EXPECT_TRUE(c.check(&excess));
}

}  // namespace
}  // namespace leap
