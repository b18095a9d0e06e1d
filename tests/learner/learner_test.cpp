#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "learner/dcp.h"
#include "learner/group_tracker.h"
#include "learner/rewards.h"
#include "learner/settings.h"

namespace leap {
namespace {

std::vector<bool> group(int n_pass, int n_fail) {
  std::vector<bool> g(static_cast<size_t>(n_pass), true);
  g.insert(g.end(), static_cast<size_t>(n_fail), false);
  return g;
}

// The defaults, from [learner] alone (DcpConfig has none of its own).
DcpConfig defaults() { return dcp_config(LearnerConfig{}); }

TEST(LearnerSettings, DefaultsRefineGroupsWithHalfOrMoreFailingButNotAllFailing) {
  auto d = defaults();
  EXPECT_EQ(d.group_size, 8);
  EXPECT_EQ(d.max_turns, 3);
  EXPECT_EQ(d.t_min, 4);  // groups with >= 50% turn-1 failures ...
  EXPECT_EQ(d.t_max, 8);
  EXPECT_FALSE(d.refine_all_failed);  // ... but not the all-failed (hopeless) ones
  EXPECT_TRUE(d.enabled);
  LearnerConfig l;
  l.reward = "kevin";
  EXPECT_EQ(reward_config(l).kind, RewardKind::kevin);
  EXPECT_DOUBLE_EQ(reward_config(l).kevin_gamma, 0.4);
  EXPECT_EQ(reward_config(l).baseline, Baseline::group);
  l.reward = "trloo";
  l.advantage_baseline = "turn";
  EXPECT_EQ(reward_config(l).kind, RewardKind::trloo);
  EXPECT_EQ(reward_config(l).baseline, Baseline::turn);
}

TEST(Dcp, DefaultG8TablePrunesEasyAndAllFailedGroups) {
  const auto cfg = defaults();  // G=8, T=3, t_min=4
  struct Row {
    int n_fail;
    Difficulty want;
    bool refine;
  };
  const Row table[] = {{0, Difficulty::easy, false},   {1, Difficulty::easy, false},   {3, Difficulty::easy, false},
                       {4, Difficulty::medium, true},  {5, Difficulty::medium, true},  {7, Difficulty::medium, true},
                       {8, Difficulty::hopeless, false}};
  for (const auto& r : table) {
    auto d = decide_after_turn1(group(8 - r.n_fail, r.n_fail), cfg);
    EXPECT_EQ(to_string(d.difficulty), to_string(r.want)) << "n_fail " << r.n_fail;
    EXPECT_EQ(d.refine, r.refine) << "n_fail " << r.n_fail;
    EXPECT_EQ(d.next_turn.size(), r.refine ? static_cast<size_t>(r.n_fail) : 0u);
  }
  // The failed rollouts, by index, get the next turn.
  auto d = decide_after_turn1({true, false, true, false, false, true, false, true}, cfg);
  EXPECT_EQ(d.next_turn, (std::vector<int>{1, 3, 4, 6}));
}

TEST(Dcp, TheOtherReadingRefinesAllFailedGroups) {
  auto cfg = defaults();
  cfg.refine_all_failed = true;
  auto d = decide_after_turn1(group(0, 8), cfg);
  EXPECT_EQ(d.difficulty, Difficulty::medium);
  EXPECT_EQ(d.next_turn.size(), 8u);
  cfg.t_max = 7;  // a count bound still prunes it
  EXPECT_EQ(decide_after_turn1(group(0, 8), cfg).difficulty, Difficulty::hopeless);
}

TEST(Dcp, AllFailedCountsOnlyTheRolloutsLeapEvaluated) {
  const auto cfg = defaults();
  // 6 failed, 2 voided by leap's own errors: every evaluated rollout failed: hopeless.
  std::vector<bool> voided = {false, false, false, false, false, false, true, true};
  auto d = decide_after_turn1(group(0, 8), cfg, voided);
  EXPECT_EQ(d.difficulty, Difficulty::hopeless);
  // 5 failed, 1 passed, 2 voided: medium; the voided ones get no turn 2.
  d = decide_after_turn1({true, false, false, false, false, false, false, false}, cfg, voided);
  EXPECT_EQ(d.difficulty, Difficulty::medium);
  EXPECT_EQ(d.next_turn, (std::vector<int>{1, 2, 3, 4, 5}));
  // Every rollout voided: nothing evaluated is not "no failure" (easy): voided, and no turn 2.
  d = decide_after_turn1(group(0, 8), cfg, std::vector<bool>(8, true));
  EXPECT_EQ(d.difficulty, Difficulty::voided);
  EXPECT_EQ(to_string(d.difficulty), "voided");
  EXPECT_FALSE(d.refine);
  EXPECT_TRUE(d.next_turn.empty());
}

TEST(Dcp, UnprunedBaselineRefinesEveryGroupWithAFailure) {
  auto cfg = defaults();
  cfg.enabled = false;
  EXPECT_FALSE(decide_after_turn1(group(8, 0), cfg).refine);
  auto easy = decide_after_turn1(group(6, 2), cfg);
  EXPECT_EQ(easy.difficulty, Difficulty::easy);  // still classified, for the metrics
  EXPECT_TRUE(easy.refine);
  EXPECT_EQ(easy.next_turn, (std::vector<int>{6, 7}));
  EXPECT_EQ(decide_after_turn1(group(0, 8), cfg).next_turn.size(), 8u);
}

TEST(Dcp, G4AndSingleTurn) {
  LearnerConfig l;
  l.group_size = 4;
  auto cfg = dcp_config(l);  // fractions: t_min 2, t_max 4, all-failed pruned
  EXPECT_EQ(cfg.t_min, 2);
  EXPECT_EQ(decide_after_turn1(group(3, 1), cfg).difficulty, Difficulty::easy);
  EXPECT_EQ(decide_after_turn1(group(2, 2), cfg).difficulty, Difficulty::medium);
  EXPECT_EQ(decide_after_turn1(group(1, 3), cfg).difficulty, Difficulty::medium);
  EXPECT_EQ(decide_after_turn1(group(0, 4), cfg).difficulty, Difficulty::hopeless);
  cfg.max_turns = 1;
  EXPECT_FALSE(decide_after_turn1(group(2, 2), cfg).refine);
  EXPECT_THROW(decide_after_turn1(group(2, 3), cfg), LeapError);  // wrong group size
}

TEST(Dcp, LaterTurnsContinueUntilSolvedOrT) {
  auto cfg = defaults();
  EXPECT_EQ(next_turn_rollouts({0, 2, 0, 1}, 2, cfg), (std::vector<int>{0, 2}));
  EXPECT_TRUE(next_turn_rollouts({0, 2, 0, 1}, 3, cfg).empty());
  cfg.t_min = 5;
  cfg.t_max = 4;
  EXPECT_THROW(validate(cfg), LeapError);
}

Trajectory solved_at(int turn, double speedup = 1.0) {
  Trajectory t(static_cast<size_t>(turn));
  t.back() = {true, speedup};
  return t;
}
Trajectory failed(int turns) { return Trajectory(static_cast<size_t>(turns)); }

// LEAP's discounted rank reward: `net` over G - 1 peers, discounted from final turn f to turn t.
double discounted_rank(int net, int f, double gamma, int t) { return net / 3.0 * std::pow(gamma, f - t); }

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "index " << i;
}

TEST(RankReward, HandComputedG4) {
  // solved at turn 1 > solved at turn 2 > failed = failed
  expect_near(rank_rewards({solved_at(1), solved_at(2), failed(3), failed(3)}, false),
              {1.0, 1.0 / 3, -2.0 / 3, -2.0 / 3});
}

TEST(RankReward, HandComputedG8AndZeroSum) {
  std::vector<Trajectory> g;
  for (int i = 0; i < 4; ++i) g.push_back(solved_at(1));
  for (int i = 0; i < 2; ++i) g.push_back(solved_at(2));
  for (int i = 0; i < 2; ++i) g.push_back(failed(3));
  auto r = rank_rewards(g, false);
  expect_near(r, {4.0 / 7, 4.0 / 7, 4.0 / 7, 4.0 / 7, -2.0 / 7, -2.0 / 7, -6.0 / 7, -6.0 / 7});
  double sum = 0;
  for (double x : r) sum += x;
  EXPECT_NEAR(sum, 0, 1e-12);
}

TEST(RankReward, AllPassAllFailAndTies) {
  expect_near(rank_rewards(std::vector<Trajectory>(8, solved_at(1)), false), std::vector<double>(8, 0.0));
  expect_near(rank_rewards(std::vector<Trajectory>(8, failed(1)), false), std::vector<double>(8, 0.0));
  // Speed tie-break off: equal outcomes tie; on: the faster ranks higher.
  std::vector<Trajectory> g = {solved_at(1, 2.0), solved_at(1, 1.0), failed(1)};
  expect_near(rank_rewards(g, false), {0.5, 0.5, -1.0});
  expect_near(rank_rewards(g, true), {1.0, 0.0, -1.0});
}

TEST(Advantages, RankDiscountsPositiveRewardsOnly) {
  RewardConfig cfg;  // rank, gamma 0.8
  auto a = group_advantages({solved_at(1), solved_at(2), failed(3), failed(3)}, cfg).advantages;
  expect_near(a[0], {1.0});
  expect_near(a[1], {1.0 / 3 * 0.8, 1.0 / 3});
  expect_near(a[2], {-2.0 / 3, -2.0 / 3, -2.0 / 3});
}

TEST(Advantages, BinaryBaseline) {
  RewardConfig cfg;
  cfg.kind = RewardKind::binary;
  auto a = group_advantages({solved_at(1), solved_at(2), failed(3), failed(1)}, cfg).advantages;
  expect_near(a[0], {0.5});
  expect_near(a[1], {0.5, 0.5});
  expect_near(a[2], {-0.5, -0.5, -0.5});
  expect_near(a[3], {-0.5});
}

TEST(Advantages, GroupStdNormalisationDividesByTheRewardSpread) {
  RewardConfig cfg;
  cfg.kind = RewardKind::binary;
  cfg.normalize_std = true;  // solved 1,1,0,0: mean 0.5, sd 0.5
  auto a = group_advantages({solved_at(1), solved_at(2), failed(3), failed(1)}, cfg).advantages;
  expect_near(a[0], {0.5 / (0.5 + 1e-6)});
  expect_near(a[2], {-0.5 / (0.5 + 1e-6), -0.5 / (0.5 + 1e-6), -0.5 / (0.5 + 1e-6)});
  // All alike: nothing to divide (and nothing learned).
  auto same = group_advantages({failed(1), failed(2)}, cfg).advantages;
  expect_near(same[0], {0.0});
  // Rank: the rewards' spread, the discount kept.
  RewardConfig rank;
  rank.normalize_std = true;
  auto plain = group_advantages({solved_at(2), failed(2)}, RewardConfig{}).advantages;
  auto norm = group_advantages({solved_at(2), failed(2)}, rank).advantages;
  EXPECT_NEAR(norm[0][0] / norm[0][1], plain[0][0] / plain[0][1], 1e-9);
  EXPECT_NEAR(norm[1][0], plain[1][0] / (1.0 + 1e-6), 1e-9);  // rewards +1, -1: sd 1
}

// G = 4, T = 2. n1/n2/n0 = 2/1/1: A, B solved at turn 1, C fixed at turn 2, D failed twice.
std::vector<Trajectory> two_one_one() { return {solved_at(1), solved_at(1), solved_at(2), failed(2)}; }
// n1/n2/n0 = 1/1/2: A solved at turn 1, B fixed at turn 2, C and D failed twice.
std::vector<Trajectory> one_one_two() { return {solved_at(1), solved_at(2), failed(2), failed(2)}; }

double turn_sum(const std::vector<std::vector<double>>& a, size_t t) {
  double s = 0;
  for (const auto& r : a)
    if (r.size() > t) s += r[t];
  return s;
}

TEST(Advantages, LeapsGroupBaselineMakesRefinementNetNegative) {
  RewardConfig cfg;  // rank, group baseline, gamma 0.8
  auto a = group_advantages(two_one_one(), cfg).advantages;
  // A, B beat C and D and tie: 2/3. C beats D, loses to A, B: -1/3 on both turns. D: -1.
  expect_near(a[0], {2.0 / 3});
  expect_near(a[2], {-1.0 / 3, -1.0 / 3});  // a successful fix, negative
  expect_near(a[3], {-1.0, -1.0});
  EXPECT_NEAR(turn_sum(a, 1), -2.0 * 2 / 3, 1e-12);  // -n1 (G - n1) / (G - 1)
  a = group_advantages(one_one_two(), cfg).advantages;
  expect_near(a[0], {1.0});
  expect_near(a[1], {1.0 / 3 * 0.8, 1.0 / 3});
  expect_near(a[2], {-2.0 / 3, -2.0 / 3});
  EXPECT_NEAR(turn_sum(a, 1), -1.0 * 3 / 3, 1e-12);
}

TEST(Advantages, PerTurnBaselineRanksARefinementAmongTheRolloutsThatReachedItsTurn) {
  RewardConfig cfg;
  cfg.baseline = Baseline::turn;
  auto c = group_advantages(two_one_one(), cfg);
  EXPECT_TRUE(c.lone.empty());
  // Turn 1 is LEAP's; turn 2's cohort is {C, D}: C beats D.
  expect_near(c.advantages[0], {2.0 / 3});
  expect_near(c.advantages[1], {2.0 / 3});
  expect_near(c.advantages[2], {-1.0 / 3, 1.0});
  expect_near(c.advantages[3], {-1.0, -1.0});
  EXPECT_NEAR(turn_sum(c.advantages, 1), 0, 1e-12);
  c = group_advantages(one_one_two(), cfg);
  // Turn 2's cohort {B, C, D}: B beats both (1), C and D lose to B and tie (-1/2).
  expect_near(c.advantages[0], {1.0});
  expect_near(c.advantages[1], {1.0 / 3 * 0.8, 1.0});
  expect_near(c.advantages[2], {-2.0 / 3, -0.5});
  expect_near(c.advantages[3], {-2.0 / 3, -0.5});
  EXPECT_NEAR(turn_sum(c.advantages, 1), 0, 1e-12);
  // T = 3: a later fix ranks below an earlier one within the cohort, and its positive reward is
  // discounted back from its final turn. Cohort at 2: {B fixed at 2, C fixed at 3, D}; at 3: {C, D}.
  c = group_advantages({solved_at(1), solved_at(2), solved_at(3), failed(3)}, cfg);
  expect_near(c.advantages[1], {discounted_rank(1, 2, 0.8, 1), 1.0});
  expect_near(c.advantages[2], {-1.0 / 3, 0.0, 1.0});
  expect_near(c.advantages[3], {-1.0, -1.0, -1.0});
}

TEST(Advantages, PerTurnBinaryUsesTheCohortsMean) {
  RewardConfig cfg;
  cfg.kind = RewardKind::binary;
  cfg.baseline = Baseline::turn;
  auto a = group_advantages(one_one_two(), cfg).advantages;
  // Turn 1: solved 1,1,0,0 minus 0.5; turn 2: cohort {B, C, D} solved 1,0,0, mean 1/3.
  expect_near(a[0], {0.5});
  expect_near(a[1], {0.5, 2.0 / 3});
  expect_near(a[2], {-0.5, -1.0 / 3});
}

TEST(Advantages, TrlooIsTheReturnMinusTheOtherRolloutsAtTheSameTurn) {
  RewardConfig cfg;
  cfg.kind = RewardKind::trloo;  // gamma 0.8
  auto c = group_advantages(one_one_two(), cfg);
  // Turn 1 returns: A 1, B 0.8, C 0, D 0. Turn 2 (cohort B, C, D): B 1, C 0, D 0.
  expect_near(c.advantages[0], {1.0 - 0.8 / 3});
  expect_near(c.advantages[1], {0.8 - 1.0 / 3, 1.0});
  expect_near(c.advantages[2], {0.0 - 1.8 / 3, -0.5});
  EXPECT_TRUE(c.lone.empty());
}

TEST(Advantages, ACohortOfOneFallsBackToTheStepsLeaveOneOut) {
  RewardConfig cfg;
  cfg.baseline = Baseline::turn;
  // n1/n2/n0 = 3/1/0: C alone reached turn 2 (and fixed it).
  auto c = group_advantages({solved_at(1), solved_at(1), solved_at(1), solved_at(2)}, cfg);
  ASSERT_EQ(c.lone.size(), 1u);
  EXPECT_EQ(c.lone[0].rollout, 3);
  EXPECT_EQ(c.lone[0].turn, 2);
  EXPECT_DOUBLE_EQ(c.advantages[3][1], 0.0);  // left to the step
  // The step's samples: that lone fix (return 1) and three turn-2 samples of other groups with
  // returns 1, 0, 0; turn-1 samples do not count: 1 - 1/3.
  std::vector<TurnReturn> step = {{1, 1.0}, {2, 1.0}, {2, 1.0}, {2, 0.0}, {2, 0.0}, {1, 0.0}};
  auto loo = step_leave_one_out(step, {1});
  ASSERT_EQ(loo.size(), 1u);
  EXPECT_NEAR(loo[0], 1.0 - 1.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(step_leave_one_out({{2, 1.0}, {1, 0.0}}, {0})[0], 0.0);  // no peer anywhere
  EXPECT_NEAR(turn_return(solved_at(3), 2, 0.8), 0.8, 1e-12);
  EXPECT_DOUBLE_EQ(turn_return(failed(3), 1, 0.8), 0.0);
}

TEST(Advantages, KevinDiscountedTurnScores) {
  RewardConfig cfg;
  cfg.kind = RewardKind::kevin;  // score 0.3 + speedup when correct, gamma 0.4
  auto a = group_advantages({solved_at(2, 2.0), solved_at(1, 1.0)}, cfg).advantages;
  const double mean = (0.4 * 2.3 + 2.3 + 1.3) / 3;
  expect_near(a[0], {0.4 * 2.3 - mean, 2.3 - mean});
  expect_near(a[1], {1.3 - mean});
}

}  // namespace
}  // namespace leap


namespace leap {
namespace {

// Feeds a tracker from a table of when each rollout first succeeds (0 = never) and checks
// that only what was scheduled is run, once.
struct Simulation {
  explicit Simulation(DcpConfig dcp, RewardConfig reward = {}) : tracker(dcp, reward) {}
  GroupTracker tracker;
  int outcomes = 0;
  std::vector<GroupEvent> finals;
  std::map<int, std::vector<int>> scheduled;  // turn -> rollouts

  void run(uint64_t id, const std::vector<int>& solves_at) {
    std::vector<GroupEvent> queue = {tracker.open(id)};
    while (!queue.empty()) {
      auto e = queue.back();
      queue.pop_back();
      if (e.kind == GroupEvent::Kind::final) {
        finals.push_back(e);
        continue;
      }
      scheduled[e.turn] = e.rollouts;
      for (int r : e.rollouts) {
        ++outcomes;
        bool ok = solves_at[static_cast<size_t>(r)] == e.turn;
        for (auto& next : tracker.record({id, r, e.turn, {ok, ok ? 1.5 : 0.0}})) queue.push_back(next);
      }
    }
  }
};

TEST(GroupTracker, MediumGroupRefinesFailuresUntilSolvedOrT) {
  Simulation s(defaults());
  // 4 pass at turn 1 (medium: 4 failures); rollout 4 solves at turn 2, rollout 5 at turn 3.
  s.run(7, {1, 1, 1, 1, 2, 3, 0, 0});
  EXPECT_EQ(s.scheduled[2], (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(s.scheduled[3], (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(s.outcomes, 8 + 4 + 3);
  ASSERT_EQ(s.finals.size(), 1u);
  const auto& f = s.finals[0];
  EXPECT_EQ(f.difficulty, Difficulty::medium);
  EXPECT_EQ(f.trajectories[5].size(), 3u);
  EXPECT_EQ(f.advantages[0].size(), 1u);
  // turn-1 successes beat 4 peers and tie 3: reward 4/7.
  EXPECT_NEAR(f.advantages[0][0], 4.0 / 7, 1e-12);
  EXPECT_EQ(s.tracker.counts().medium, 1);
  EXPECT_EQ(s.tracker.open_groups(), 0u);
}

TEST(GroupTracker, PrunedGroupsRunNoFurtherTurns) {
  Simulation s(defaults());
  s.run(1, {1, 1, 1, 1, 1, 1, 0, 2});  // 2 failures: easy
  s.run(2, {0, 0, 0, 0, 0, 0, 0, 2});  // 8 failures: hopeless
  EXPECT_EQ(s.outcomes, 16);
  EXPECT_EQ(s.scheduled.count(2), 0u);
  EXPECT_EQ(s.tracker.counts().easy, 1);
  EXPECT_EQ(s.tracker.counts().hopeless, 1);
  ASSERT_EQ(s.finals.size(), 2u);
}

TEST(GroupTracker, UnprunedBaselineRefinesTheEasyGroup) {
  auto cfg = defaults();
  cfg.enabled = false;
  Simulation s(cfg);
  s.run(1, {1, 1, 1, 1, 1, 1, 0, 2});
  EXPECT_EQ(s.scheduled[2], (std::vector<int>{6, 7}));
  EXPECT_EQ(s.scheduled[3], (std::vector<int>{6}));
  EXPECT_EQ(s.outcomes, 8 + 2 + 1);
}

TEST(GroupTracker, UnscheduledOrDuplicateOutcomesAreErrors) {
  GroupTracker t(defaults(), RewardConfig{});
  t.open(3);
  EXPECT_TRUE(t.record({3, 0, 1, {true, 1.0}}).empty());
  EXPECT_THROW(t.record({3, 0, 1, {true, 1.0}}), LeapError);   // twice
  EXPECT_THROW(t.record({3, 1, 2, {true, 1.0}}), LeapError);   // turn not scheduled
  EXPECT_THROW(t.record({9, 1, 1, {true, 1.0}}), LeapError);   // group not open
  EXPECT_THROW(t.record({3, 8, 1, {true, 1.0}}), LeapError);   // no such rollout
  EXPECT_THROW(t.open(3), LeapError);
}

TEST(GroupTracker, InfraErrorsAreNeitherFailuresNorRefinedNorRewarded) {
  GroupTracker t(defaults(), RewardConfig{});  // G=8, t_min=4
  t.open(5);
  std::vector<GroupEvent> events;
  // Turn 1: 3 solved, 2 failed, 3 lost to leap's own errors. Counting those as failures would
  // make the group medium (5 failures) and refine it; among what leap evaluated it is easy.
  for (int i = 0; i < 8; ++i) {
    bool infra = i >= 5, correct = i < 3;
    events = t.record({5, i, 1, {correct, correct ? 1.0 : 0.0, infra}});
  }
  ASSERT_EQ(events.size(), 1u);
  const auto& f = events[0];
  EXPECT_EQ(f.kind, GroupEvent::Kind::final);
  EXPECT_EQ(f.difficulty, Difficulty::easy);
  EXPECT_EQ(t.counts().easy, 1);
  for (int i = 5; i < 8; ++i) EXPECT_DOUBLE_EQ(f.advantages[static_cast<size_t>(i)][0], 0.0) << i;
  // The five evaluated rollouts are ranked among themselves: a success beats 2 peers of 4.
  EXPECT_NEAR(f.advantages[0][0], 2.0 / 4, 1e-12);
  EXPECT_NEAR(f.advantages[3][0], -3.0 / 4, 1e-12);
}

TEST(GroupTracker, AGroupLostWhollyToInfraErrorsIsVoidedNotEasy) {
  GroupTracker t(defaults(), RewardConfig{});
  t.open(2);
  std::vector<GroupEvent> events;
  for (int i = 0; i < 8; ++i) events = t.record({2, i, 1, {false, 0.0, true}});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, GroupEvent::Kind::final);  // no turn 2 for what leap could not evaluate
  EXPECT_EQ(events[0].difficulty, Difficulty::voided);
  EXPECT_EQ(t.counts().voided, 1);
  EXPECT_EQ(t.counts().easy + t.counts().medium + t.counts().hopeless, 0);
  for (const auto& a : events[0].advantages) EXPECT_DOUBLE_EQ(a[0], 0.0);  // nothing enters a reward
}

TEST(GroupTracker, AnInfraErrorAtALaterTurnEndsOnlyThatRollout) {
  GroupTracker t(defaults(), RewardConfig{});
  t.open(1);
  std::vector<GroupEvent> ev;
  for (int i = 0; i < 8; ++i) ev = t.record({1, i, 1, {i < 4, 1.0, false}});  // medium: 4 failures
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].rollouts, (std::vector<int>{4, 5, 6, 7}));
  t.record({1, 4, 2, {false, 0, true}});  // lost to leap at turn 2
  t.record({1, 5, 2, {false, 0, false}});
  t.record({1, 6, 2, {false, 0, false}});
  ev = t.record({1, 7, 2, {false, 0, false}});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].rollouts, (std::vector<int>{5, 6, 7}));  // rollout 4 gets no turn 3
}

}  // namespace
}  // namespace leap
