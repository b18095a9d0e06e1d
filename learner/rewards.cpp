#include "learner/rewards.h"

#include <cmath>

#include "common/error.h"

namespace leap {

std::string to_string(RewardKind k) {
  switch (k) {
    case RewardKind::rank: return "rank";
    case RewardKind::binary: return "binary";
    case RewardKind::kevin: return "kevin";
    case RewardKind::trloo: return "trloo";
  }
  return "?";
}

namespace {

// First solved turn (1-based), 0 if never.
int solved_turn(const Trajectory& t) {
  for (size_t k = 0; k < t.size(); ++k)
    if (t[k].correct) return static_cast<int>(k + 1);
  return 0;
}

double solved_speedup(const Trajectory& t) {
  int s = solved_turn(t);
  return s ? t[static_cast<size_t>(s - 1)].speedup : 0;
}

// -1: a ranks below b, 0: tie, 1: a ranks above b.
int compare(const Trajectory& a, const Trajectory& b, bool tiebreak) {
  int sa = solved_turn(a), sb = solved_turn(b);
  int ka = sa ? 1000 - sa : 0, kb = sb ? 1000 - sb : 0;  // earlier success ranks higher
  if (ka != kb) return ka > kb ? 1 : -1;
  if (tiebreak && sa) {
    double va = solved_speedup(a), vb = solved_speedup(b);
    if (va != vb) return va > vb ? 1 : -1;
  }
  return 0;
}

}  // namespace

std::vector<double> rank_rewards(const std::vector<Trajectory>& g, bool tiebreak) {
  if (g.size() < 2) throw LeapError("rank reward needs a group of at least 2");
  std::vector<double> r(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    int net = 0;
    for (size_t j = 0; j < g.size(); ++j)
      if (j != i) net += compare(g[i], g[j], tiebreak);
    r[i] = static_cast<double>(net) / static_cast<double>(g.size() - 1);
  }
  return r;
}

namespace {

// LEAP's per-turn form of a reward r of a rollout whose final turn is f: positive, discounted back
// from f; otherwise the same at every turn.
double discounted(double r, size_t f, size_t turn, double gamma) {
  return r > 0 ? r * std::pow(gamma, static_cast<double>(f - turn)) : r;
}

// Rollouts of the group that reached turn `turn` (1-based).
std::vector<size_t> cohort(const std::vector<Trajectory>& g, size_t turn) {
  std::vector<size_t> c;
  for (size_t j = 0; j < g.size(); ++j)
    if (g[j].size() >= turn) c.push_back(j);
  return c;
}

// Long: one pass per reward kind over the same group statistics; the kinds differ in a few lines each.
GroupCredit advantages_of(const std::vector<Trajectory>& g, const RewardConfig& cfg) {
  GroupCredit out;
  auto& adv = out.advantages;
  adv.resize(g.size());
  std::vector<double> reward(g.size());  // one per rollout, for the optional normalisation
  const bool per_turn = cfg.baseline == Baseline::turn || cfg.kind == RewardKind::trloo;
  // The advantage of rollout i's turn `turn` (>= 2 under a per-turn baseline) among its cohort,
  // or a lone sample.
  auto within_cohort = [&](size_t i, size_t turn, auto&& value) {
    auto c = cohort(g, turn);
    if (c.size() < 2) {
      out.lone.push_back({static_cast<int>(i), static_cast<int>(turn)});
      return 0.0;
    }
    return value(c);
  };
  if (cfg.kind == RewardKind::rank) {
    auto r = rank_rewards(g, cfg.speedup_tiebreak);
    reward = r;
    for (size_t i = 0; i < g.size(); ++i) {
      const size_t f = g[i].size();
      for (size_t turn = 1; turn <= f; ++turn) {
        if (turn == 1 || !per_turn) {
          adv[i].push_back(discounted(r[i], f, turn, cfg.gamma));
          continue;
        }
        adv[i].push_back(within_cohort(i, turn, [&](const std::vector<size_t>& c) {
          int net = 0;
          for (size_t j : c)
            if (j != i) net += compare(g[i], g[j], cfg.speedup_tiebreak);
          return discounted(static_cast<double>(net) / static_cast<double>(c.size() - 1), f, turn, cfg.gamma);
        }));
      }
    }
  } else if (cfg.kind == RewardKind::binary) {
    auto solved = [&](size_t j) { return solved_turn(g[j]) ? 1.0 : 0.0; };
    double mean = 0;
    for (size_t j = 0; j < g.size(); ++j) mean += solved(j) / static_cast<double>(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      reward[i] = solved(i);
      for (size_t turn = 1; turn <= g[i].size(); ++turn) {
        if (turn == 1 || !per_turn) {
          adv[i].push_back(reward[i] - mean);
          continue;
        }
        adv[i].push_back(within_cohort(i, turn, [&](const std::vector<size_t>& c) {
          double m = 0;
          for (size_t j : c) m += solved(j) / static_cast<double>(c.size());
          return reward[i] - m;
        }));
      }
    }
  } else if (cfg.kind == RewardKind::trloo) {
    for (size_t i = 0; i < g.size(); ++i) {
      reward[i] = turn_return(g[i], 1, cfg.gamma);
      for (size_t turn = 1; turn <= g[i].size(); ++turn)
        adv[i].push_back(within_cohort(i, turn, [&](const std::vector<size_t>& c) {
          double others = 0;
          for (size_t j : c)
            if (j != i) others += turn_return(g[j], static_cast<int>(turn), cfg.gamma);
          return turn_return(g[i], static_cast<int>(turn), cfg.gamma) - others / static_cast<double>(c.size() - 1);
        }));
    }
  } else {
    double sum = 0;
    size_t n = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      std::vector<double> ret(g[i].size());
      double acc = 0;
      for (size_t k = g[i].size(); k-- > 0;) {
        const auto& turn = g[i][k];
        double score = turn.correct ? 0.3 + turn.speedup : 0.0;
        acc = score + cfg.kevin_gamma * acc;
        ret[k] = acc;
      }
      for (double x : ret) sum += x, ++n;
      reward[i] = ret.front();
      adv[i] = ret;
    }
    double mean = sum / static_cast<double>(n);
    for (auto& a : adv)
      for (auto& x : a) x -= mean;
  }
  if (cfg.normalize_std) {
    double mean = 0, var = 0;
    for (double r : reward) mean += r / static_cast<double>(reward.size());
    for (double r : reward) var += (r - mean) * (r - mean) / static_cast<double>(reward.size());
    const double sd = std::sqrt(var);
    if (sd > 1e-8)
      for (auto& a : adv)
        for (auto& x : a) x /= sd + 1e-6;
  }
  return out;
}

}  // namespace

double turn_return(const Trajectory& t, int turn, double gamma) {
  const int s = solved_turn(t);
  return s && s >= turn ? std::pow(gamma, static_cast<double>(s - turn)) : 0.0;
}

GroupCredit group_advantages(const std::vector<Trajectory>& g, const RewardConfig& cfg) {
  for (const auto& t : g)
    if (t.empty()) throw LeapError("a rollout without turns has no advantage");
  // A rollout whose last evaluation failed on leap's side (infra_error) is left out: no rank
  // against its peers, no reward, no advantage. The others are rewarded among themselves.
  std::vector<size_t> valid;
  for (size_t i = 0; i < g.size(); ++i)
    if (!g[i].back().infra) valid.push_back(i);
  if (valid.size() == g.size()) return advantages_of(g, cfg);
  GroupCredit out;
  out.advantages.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) out.advantages[i].assign(g[i].size(), 0.0);
  if (valid.size() < 2) return out;
  std::vector<Trajectory> sub;
  for (size_t i : valid) sub.push_back(g[i]);
  auto a = advantages_of(sub, cfg);
  for (size_t k = 0; k < valid.size(); ++k) out.advantages[valid[k]] = a.advantages[k];
  for (auto l : a.lone) out.lone.push_back({static_cast<int>(valid[static_cast<size_t>(l.rollout)]), l.turn});
  return out;
}

std::vector<double> step_leave_one_out(const std::vector<TurnReturn>& step, const std::vector<size_t>& lone) {
  std::vector<double> out;
  for (size_t k : lone) {
    if (k >= step.size()) throw LeapError("step_leave_one_out: no sample " + std::to_string(k));
    double sum = 0;
    size_t n = 0;
    for (size_t j = 0; j < step.size(); ++j)
      if (j != k && step[j].turn == step[k].turn) sum += step[j].ret, ++n;
    out.push_back(n ? step[k].ret - sum / static_cast<double>(n) : 0.0);
  }
  return out;
}

StepCredit step_advantages(const std::vector<std::vector<Trajectory>>& step, const RewardConfig& cfg) {
  StepCredit credit_of_step;
  auto& out = credit_of_step.advantages;
  std::vector<TurnReturn> returns;
  std::vector<size_t> alone;
  std::vector<double*> alone_at;
  out.reserve(step.size());  // alone_at points into it
  for (const auto& g : step) {
    auto credit = group_advantages(g, cfg);
    auto& adv = out.emplace_back(std::move(credit.advantages));
    for (size_t i = 0; i < g.size(); ++i) {
      if (g[i].back().infra) continue;  // no sample: leap's fault
      for (size_t t = 0; t < g[i].size(); ++t) {
        const int turn = static_cast<int>(t) + 1;
        for (const auto& l : credit.lone)
          if (l.rollout == static_cast<int>(i) && l.turn == turn) {
            alone.push_back(returns.size());
            alone_at.push_back(&adv[i][t]);
          }
        returns.push_back({turn, turn_return(g[i], turn, cfg.gamma)});
      }
    }
  }
  const auto loo = step_leave_one_out(returns, alone);
  for (size_t k = 0; k < alone.size(); ++k) *alone_at[k] = loo[k];
  credit_of_step.lone = alone.size();
  return credit_of_step;
}

}  // namespace leap
