// The service's DCP group register and the trainers' view of the learner's advantages (a step's
// credit, and the same through libleap_credit's C ABI).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "learner/group_register.h"
#include "learner/rewards.h"

extern "C" int leap_step_advantages(const char* learner_toml, int n_groups, const int* group_sizes, const int* turns,
                                    const unsigned char* correct, const double* speedup, const unsigned char* infra,
                                    double* out, char* err, size_t err_len);

namespace leap {
namespace {

Trajectory solved_at(int turn) {
  Trajectory t(static_cast<size_t>(turn));
  t.back() = {true, 1.0};
  return t;
}
Trajectory failed(int turns) { return Trajectory(static_cast<size_t>(turns)); }
Trajectory infra_at(int turn) {
  Trajectory t(static_cast<size_t>(turn));
  t.back().infra = true;
  return t;
}

TEST(StepAdvantages, ALoneFixIsComparedWithTheStepsOtherSamplesAtItsTurn) {
  RewardConfig cfg;
  cfg.baseline = Baseline::turn;
  // Group 0: three solved at turn 1, D alone at turn 2 (fixed it). Group 1: A solved at 1, B fixed
  // at 2, C and D failed twice. Group 2: a rollout leap failed at turn 2 (no sample, no peer).
  auto credit = step_advantages({{solved_at(1), solved_at(1), solved_at(1), solved_at(2)},
                            {solved_at(1), solved_at(2), failed(2), failed(2)},
                            {solved_at(1), failed(1), infra_at(2), failed(1)}},
                           cfg);
  EXPECT_EQ(credit.lone, 1u);
  const auto& a = credit.advantages;
  // D's turn 2: its return 1 minus the other turn-2 samples' (B 1, C 0, D 0; not the infra one).
  EXPECT_NEAR(a[0][3][1], 1.0 - 1.0 / 3, 1e-12);
  // Group 1 as the group's own credit: B's turn 2 beats C and D in its cohort.
  EXPECT_NEAR(a[1][1][1], 1.0, 1e-12);
  EXPECT_NEAR(a[1][2][1], -0.5, 1e-12);
  // The infra rollout gets zeros; the others are ranked among themselves (A beats both: 1).
  EXPECT_EQ(a[2][2], std::vector<double>({0.0, 0.0}));
  EXPECT_NEAR(a[2][0][0], 1.0, 1e-12);
  auto g = group_advantages({solved_at(1), solved_at(2), failed(2), failed(2)}, cfg).advantages;
  EXPECT_EQ(a[1], g);  // a group with no lone sample: its own credit, unchanged
}

TEST(StepAdvantages, TheCAbiReadsTheLearnerSettingsAndReportsWhatItRefuses) {
  const std::string turn = "[learner]\nadvantage_baseline = \"turn\"\n";
  const int sizes[] = {4};
  const int turns[] = {1, 2, 2, 2};
  const unsigned char correct[] = {1, 0, 1, 0, 0, 0, 0};
  const double speedup[] = {1, 0, 1, 0, 0, 0, 0};
  const unsigned char infra[7] = {};
  double out[7];
  char err[256];
  ASSERT_EQ(leap_step_advantages(turn.c_str(), 1, sizes, turns, correct, speedup, infra, out, err, sizeof err), 0) << err;
  auto want = step_advantages({{solved_at(1), solved_at(2), failed(2), failed(2)}},
                              [] { RewardConfig c; c.baseline = Baseline::turn; return c; }()).advantages;
  EXPECT_NEAR(out[0], want[0][0][0], 1e-12);
  EXPECT_NEAR(out[2], want[0][1][1], 1e-12);
  EXPECT_NEAR(out[6], want[0][3][1], 1e-12);
  EXPECT_NE(out[2], 1.0 / 3);  // the group baseline's value: the settings were read
  const int four[] = {4, 1, 1, 1};
  EXPECT_EQ(leap_step_advantages("", 1, sizes, four, correct, speedup, infra, out, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("max_turns is 3"), std::string::npos) << err;
  EXPECT_EQ(leap_step_advantages("[learner]\nreward = \"best\"\n", 1, sizes, turns, correct, speedup, infra, out, err,
                                 sizeof err),
            -1);
  EXPECT_NE(std::string(err).find("reward"), std::string::npos) << err;
}

// [learner] defaults with G = 4: t_min 2, t_max 4, a group in which all failed is hopeless.
TEST(DcpRegister, DecidesWhenAllReportedPerTheLearnersThresholds) {
  DcpRegister r(LearnerConfig{});
  auto s = r.report("medium", 4, true, false, 60, 0);
  EXPECT_FALSE(s.decided);
  r.report("medium", 4, true, false, 60, 1);
  r.report("medium", 4, false, false, 60, 1);
  s = r.report("medium", 4, false, false, 60, 2);
  EXPECT_TRUE(s.decided && s.refine && s.difficulty == Difficulty::medium);
  EXPECT_EQ(s.failed, 2);
  for (int i = 0; i < 4; ++i) s = r.report("easy", 4, i < 3, false, 60, 0);
  EXPECT_TRUE(s.decided && !s.refine && s.difficulty == Difficulty::easy);
  for (int i = 0; i < 4; ++i) s = r.report("hopeless", 4, false, false, 60, 0);
  EXPECT_TRUE(s.decided && !s.refine && s.difficulty == Difficulty::hopeless);
  // Infra errors are neither failures nor successes: 2 failures of 2 evaluated is all-failed.
  for (int i = 0; i < 4; ++i) s = r.report("voided", 4, false, i < 2, 60, 0);
  EXPECT_EQ(s.voided, 2);
  EXPECT_TRUE(s.decided && s.difficulty == Difficulty::hopeless);
  EXPECT_FALSE(r.get("never", 0).has_value());
  ASSERT_TRUE(r.get("medium", 100).has_value());
  EXPECT_TRUE(r.get("medium", 100)->refine);
}

TEST(DcpRegister, ALostRolloutCannotBlockItsGroup) {
  DcpRegister r(LearnerConfig{});
  r.report("g", 4, false, false, 30, 0);
  r.report("g", 4, false, false, 30, 1);
  auto s = r.report("g", 4, true, false, 30, 2);
  EXPECT_FALSE(s.decided);
  EXPECT_FALSE(r.get("g", 29.9)->decided);
  s = *r.get("g", 30);  // the deadline: decided on the three reports, the fourth voided
  EXPECT_TRUE(s.decided && s.refine && s.difficulty == Difficulty::medium);
  s = r.report("g", 4, false, false, 30, 31);  // the lost one, late: it stops
  EXPECT_TRUE(s.late && s.decided);
  EXPECT_EQ(s.failed, 2);
}

TEST(DcpRegister, RefusesWhatDcpCannotDecide) {
  DcpRegister r(LearnerConfig{}, 10, 2);
  auto field = [](auto&& f) {
    try {
      f();
    } catch (const RegisterError& e) {
      return e.field + (e.kind == RegisterError::Kind::invalid ? "/invalid" : e.kind == RegisterError::Kind::conflict ? "/conflict" : "/full");
    }
    return std::string("no error");
  };
  EXPECT_EQ(field([&] { r.report("one", 1, true, false, 60, 0); }), "group_size/invalid");
  r.report("a", 2, true, false, 60, 0);
  EXPECT_EQ(field([&] { r.report("a", 3, true, false, 60, 0); }), "group_size/conflict");
  r.report("a", 2, false, false, 60, 0);
  EXPECT_EQ(field([&] { r.report("a", 2, true, false, 60, 0); }), "group/conflict");  // a third report of two
  r.report("b", 2, true, false, 60, 0);
  EXPECT_EQ(field([&] { r.report("c", 2, true, false, 60, 1); }), "group/full");  // a and b kept 10 s
  EXPECT_EQ(field([&] { r.report("c", 2, true, false, 60, 11); }), "no error");  // a forgotten
  EXPECT_FALSE(r.get("a", 11).has_value());
}

}  // namespace
}  // namespace leap
