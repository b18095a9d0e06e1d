// The call budget alone: limits, the too-slow rule over later calls, the stop's verdict and the
// trial cut, from numbers as the judge measures them (no runner).
#include <gtest/gtest.h>

#include "judge/timing/call_budget.h"

namespace leap {
namespace {

EvalConfig limits(double ratio, double floor_ms, double slow_stop = 2) {
  EvalConfig e;
  e.call_limit_ratio = ratio;
  e.call_limit_floor_ms = floor_ms;
  e.slow_stop_ratio = slow_stop;
  return e;
}

TEST(CallBudget, TheLimitIsTheRatioTimesTheReferenceNeverUnderTheFloorAndOffWithoutEither) {
  CallBudget b(limits(100, 50), 30);
  EXPECT_EQ(b.limit_ms(), 0);  // no reference timed yet: the deadline alone
  b.set_reference(26.6);
  EXPECT_DOUBLE_EQ(b.limit_ms(), 50);  // 100 x 26.6 us is under the floor
  b.set_reference(2000);
  EXPECT_DOUBLE_EQ(b.limit_ms(), 200);
  EXPECT_EQ(b.stop_after_ms(0), 0);  // the first call's budget is the deadline
  EXPECT_DOUBLE_EQ(b.stop_after_ms(1), 2000);
  EXPECT_NE(b.limit_text().find("200.0 ms = max(100 x reference 2000.0 us, floor 50.0 ms)"), std::string::npos);
  CallBudget off(limits(0, 50), 30);
  off.set_reference(2000);
  EXPECT_EQ(off.limit_ms(), 0);
  EXPECT_FALSE(off.over_limit(1e12));
}

TEST(CallBudget, TooSlowOnceMostLaterCallsRanOverTheLimitOneStallForgiven) {
  CallBudget b(limits(100, 1), 30);
  b.set_reference(100);  // limit 10 ms
  EXPECT_FALSE(b.after_call(1, 15000));  // call 2 over: one stall is forgiven
  EXPECT_FALSE(b.after_call(2, 5000));   // call 3 under
  EXPECT_FALSE(b.after_call(3, 5000));   // 1 of 3
  auto v = b.after_call(4, 12000);       // 2 of 4: not most
  EXPECT_FALSE(v);
  v = b.after_call(5, 11000);  // 3 of 5
  ASSERT_TRUE(v);
  EXPECT_EQ(v->status, Status::timeout);
  EXPECT_EQ(v->check, Check::too_slow);
  EXPECT_NE(v->feedback.find("3 of calls 2-6"), std::string::npos) << v->feedback;

  CallBudget two(limits(100, 1), 30);
  two.set_reference(100);
  EXPECT_FALSE(two.after_call(1, 20000));
  v = two.after_call(2, 20000);  // both of calls 2 and 3 decide
  ASSERT_TRUE(v);
  EXPECT_NE(v->feedback.find("call 3 took 20.0 ms; 2 of calls 2-3"), std::string::npos) << v->feedback;

  CallBudget fast(limits(100, 1), 30);
  fast.set_reference(100);
  for (size_t i = 1; i < 50; ++i) EXPECT_FALSE(fast.after_call(i, 9000));
}

TEST(CallBudget, AStoppedCallIsTooSlowNamingTheDeadlineForTheFirstAndTheLimitForLaterOnes) {
  CallBudget b(limits(100, 50), 4);
  b.set_reference(1000);  // limit 100 ms
  const Verdict first = b.stopped(0);
  EXPECT_EQ(first.status, Status::timeout);
  EXPECT_EQ(first.check, Check::too_slow);
  EXPECT_NE(first.feedback.find("call 1 did not end within the evaluation's 4 s deadline"), std::string::npos);
  const Verdict later = b.stopped(3);
  EXPECT_NE(later.feedback.find("call 4 took longer than 1000.0 ms, 10 x its limit of 100.0 ms"), std::string::npos)
      << later.feedback;
  EXPECT_TRUE(b.over_limit(100001));
  EXPECT_FALSE(b.over_limit(99999));
}

TEST(CallBudget, TrialsAreCutOnlyForACandidateClearlySlowerThanItsReferenceAndAMillisecond) {
  CallBudget b(limits(100, 50, 2), 30);
  b.set_reference(400);
  EXPECT_FALSE(b.cut_trials(900));  // 2.25x, but under a millisecond: trials are cheap
  EXPECT_FALSE(b.trials_cut());
  EXPECT_TRUE(b.cut_trials(1200));  // 3x and over a millisecond
  EXPECT_TRUE(b.trials_cut());
  CallBudget near(limits(100, 50, 2), 30);
  near.set_reference(800);
  EXPECT_FALSE(near.cut_trials(1500));  // under 2x
  CallBudget off(limits(100, 50, 0), 30);
  off.set_reference(400);
  EXPECT_FALSE(off.cut_trials(1e6));  // slow_stop_ratio 0: never
  CallBudget unknown(limits(100, 50, 2), 30);
  EXPECT_FALSE(unknown.cut_trials(1e6));  // no reference: never
}

}  // namespace
}  // namespace leap
