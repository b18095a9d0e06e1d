#include <gtest/gtest.h>

#include <cmath>

#include "tasks/comparison.h"

namespace leap {
namespace {

TEST(Comparison, BoundaryIsAtolPlusRtolTimesReference) {
  Tolerance tol{1e-3, 1e-2};
  double ref[] = {10.0, 10.0, 0.0};
  double inside[] = {10.0 + 0.101 - 1e-9, 10.0 - 0.101 + 1e-9, 1e-3};
  EXPECT_TRUE(compare_values(inside, ref, 3, tol).passed);
  double outside[] = {10.0 + 0.1011, 10.0, 0.0};
  auto c = compare_values(outside, ref, 3, tol);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.first_bad, 0);
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_NEAR(c.max_abs, 0.1011, 1e-12);
}

TEST(Comparison, NanNeverPassesAgainstANumber) {
  double ref[] = {1.0, NAN};
  double out[] = {NAN, NAN};
  auto c = compare_values(out, ref, 2, {1, 1});
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.first_bad, 0);
  EXPECT_EQ(c.mismatches, 1);  // both-NaN agrees
  EXPECT_TRUE(std::isinf(c.max_abs));
}

TEST(Comparison, MatchingInfinitiesPass) {
  double ref[] = {INFINITY, -INFINITY};
  double out[] = {INFINITY, INFINITY};
  auto c = compare_values(out, ref, 2, {1e-4, 1e-4});
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_EQ(c.first_bad, 1);
}

TEST(Comparison, DefaultTolerancesTightenWithPrecision) {
  EXPECT_LT(default_tolerance(DType::float64).atol, default_tolerance(DType::float32).atol);
  EXPECT_LT(default_tolerance(DType::float32).atol, default_tolerance(DType::float16).atol);
  EXPECT_LE(default_tolerance(DType::float16).atol, default_tolerance(DType::bfloat16).atol);
  EXPECT_EQ(default_tolerance(DType::int32).atol, 0);
}

TEST(Comparison, MismatchReportGivesMultiIndexAndValues) {
  double ref[6] = {0, 1, 2, 3, 4, 5};
  double out[6] = {0, 1, 2, 3, 9, 5};
  auto c = compare_values(out, ref, 6, {1e-4, 1e-4});
  auto text = describe_mismatch(c, {2, 3}, {1e-4, 1e-4}, "y");
  EXPECT_NE(text.find("1 of 6 elements"), std::string::npos) << text;
  EXPECT_NE(text.find("[1, 1] (flat 4): got 9, expected 4"), std::string::npos) << text;
  EXPECT_NE(text.find("max abs error 5"), std::string::npos) << text;
}

}  // namespace
}  // namespace leap
