#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "judge/check/comparison.h"

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

// A softmax over 16384 elements (values near 6e-5) under KernelBench's atol = rtol = 1e-2: by the
// absolute tolerance alone an all-zero answer and a constant 1/N (the normalisation skipped)
// pass; held to the reference's magnitude neither does, and an honest answer (0.1 % off) still does.
TEST(Comparison, SmallOutputsAreNotPassedByTheAbsoluteToleranceAlone) {
  const int n = 16384;
  std::vector<double> ref(n), zeros(n, 0.0), uniform(n, 1.0 / n), honest(n);
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) sum += ref[i] = std::exp(std::sin(0.37 * i) * 2);
  for (int i = 0; i < n; ++i) {
    ref[i] /= sum;
    sq += ref[i] * ref[i];
    honest[i] = ref[i] * (i % 2 ? 1.001 : 0.999);
  }
  const Tolerance kb{1e-2, 1e-2};
  ASSERT_TRUE(compare_values(zeros.data(), ref.data(), n, kb).passed);  // the shortcut, unscaled
  ASSERT_TRUE(compare_values(uniform.data(), ref.data(), n, kb).passed);
  const Tolerance held = at_magnitude(kb, std::sqrt(sq / n));
  EXPECT_LT(held.atol, 1e-5);
  EXPECT_FALSE(compare_values(zeros.data(), ref.data(), n, held).passed);
  EXPECT_FALSE(compare_values(uniform.data(), ref.data(), n, held).passed);
  EXPECT_TRUE(compare_values(honest.data(), ref.data(), n, held).passed);
  // Magnitudes of 1 and more keep the tolerance as written; an all-zero reference too.
  EXPECT_EQ(at_magnitude(kb, 3.0).atol, kb.atol);
  EXPECT_EQ(at_magnitude(kb, 0.0).atol, kb.atol);
}

}  // namespace
}  // namespace leap
