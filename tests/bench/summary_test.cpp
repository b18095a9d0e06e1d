#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "common/outcome.h"

namespace leap {
namespace {

EvalOutcome make(Status s, double speedup) {
  EvalOutcome o;
  o.status = s;
  o.speedup = speedup;
  return o;
}

TEST(Summary, FastPCountsCorrectAndFasterOverAllCandidates) {
  std::vector<EvalOutcome> v = {make(Status::ok, 2.0), make(Status::ok, 1.2), make(Status::ok, 0.5),
                                make(Status::wrong_answer, 5.0)};
  EXPECT_DOUBLE_EQ(fast_p(v, 1.0), 0.5);
  EXPECT_DOUBLE_EQ(fast_p(v, 1.5), 0.25);
  EXPECT_DOUBLE_EQ(fast_p(v, 0.0), 0.75);
  auto s = summarize(v);
  EXPECT_EQ(s.total, 4u);
  EXPECT_DOUBLE_EQ(s.correct_rate, 0.75);
  EXPECT_DOUBLE_EQ(s.fast_0, 0.75);  // correct at any speed
  EXPECT_DOUBLE_EQ(s.fast_2, 0.0);   // the 5x one is wrong: it does not count
  EXPECT_NEAR(s.geomean_speedup, std::cbrt(2.0 * 1.2 * 0.5), 1e-12);
  EXPECT_EQ(s.by_status[Status::wrong_answer], 1u);
}

TEST(Summary, InfraErrorsAreLeftOutOfEveryRateAndCountedApart) {
  std::vector<EvalOutcome> v = {make(Status::ok, 2.0), make(Status::wrong_answer, 0), make(Status::infra_error, 0),
                                make(Status::infra_error, 0)};
  auto s = summarize(v);
  EXPECT_EQ(s.total, 4u);
  EXPECT_EQ(s.judged, 2u);
  EXPECT_EQ(s.infra_errors, 2u);
  EXPECT_DOUBLE_EQ(s.correct_rate, 0.5);  // 1 of the 2 judged, not of 4
  EXPECT_DOUBLE_EQ(s.fast_1, 0.5);
  EXPECT_DOUBLE_EQ(fast_p({make(Status::infra_error, 0)}, 0.0), 0.0);  // nothing judged
}

TEST(Summary, EmptyAndAllFailedAreZero) {
  EXPECT_DOUBLE_EQ(summarize({}).correct_rate, 0);
  auto s = summarize({make(Status::timeout, 0)});
  EXPECT_DOUBLE_EQ(s.geomean_speedup, 0);
  EXPECT_DOUBLE_EQ(s.fast_1, 0);
}

TEST(Summary, StatusNamesRoundTrip) {
  for (auto st : {Status::ok, Status::compile_error, Status::runtime_error, Status::timeout, Status::wrong_answer,
                  Status::cheat_detected, Status::infra_error})
    EXPECT_EQ(status_from(to_string(st)), st);
  EXPECT_FALSE(status_from("fine").has_value());
}

TEST(Summary, JsonRecordCarriesEveryStage) {
  EvalOutcome o = make(Status::cheat_detected, 0);
  o.check = Check::partial_write;
  o.trials.push_back({0, true, 1e-6, 1e-5, -1, 0});
  o.stages.compile_us = 1234;
  auto j = to_json(o);
  EXPECT_EQ(j["status"], "cheat_detected");
  EXPECT_EQ(j["check"], "partial_write");
  EXPECT_EQ(j["correct_trials"], 1);
  EXPECT_EQ(j["stages"]["compile_us"], 1234);
  for (const char* k : {"queue_wait_us", "load_us", "correctness_us", "timing_us", "eval_us", "total_us"})
    EXPECT_TRUE(j["stages"].contains(k)) << k;
}

TEST(Summary, TimeToTargetCountsOnlyATargetHeldToTheEnd) {
  using bench::first_held_at;
  // Reached at evaluation 2 and held.
  EXPECT_EQ(first_held_at({0.0, 0.5, 0.75, 1.0, 0.75}, 0.75), 2);
  // Touched at 0 (a lucky initial policy) and at 2, then lost: not reached.
  EXPECT_EQ(first_held_at({1.0, 0.5, 0.75, 0.5}, 0.75), -1);
  // Lost after the first touch, held from 3 on: reached at 3, not at 0.
  EXPECT_EQ(first_held_at({1.0, 0.25, 0.5, 0.75, 1.0}, 0.75), 3);
  EXPECT_EQ(first_held_at({}, 0.75), -1);
  EXPECT_EQ(first_held_at({0.75}, 0.75), 0);
}

}  // namespace
}  // namespace leap
