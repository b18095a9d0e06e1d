#include "learner/rewards.h"

#include <cmath>

#include "common/error.h"

namespace leap {

std::string to_string(RewardKind k) {
  switch (k) {
    case RewardKind::rank: return "rank";
    case RewardKind::binary: return "binary";
    case RewardKind::kevin: return "kevin";
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

std::vector<std::vector<double>> advantages_of(const std::vector<Trajectory>& g, const RewardConfig& cfg) {
  std::vector<std::vector<double>> adv(g.size());
  std::vector<double> reward(g.size());  // one per rollout, for the optional normalisation
  for (const auto& t : g)
    if (t.empty()) throw LeapError("a rollout without turns has no advantage");
  if (cfg.kind == RewardKind::rank) {
    auto r = rank_rewards(g, cfg.speedup_tiebreak);
    reward = r;
    for (size_t i = 0; i < g.size(); ++i) {
      size_t f = g[i].size();
      for (size_t t = 0; t < f; ++t)
        adv[i].push_back(r[i] > 0 ? r[i] * std::pow(cfg.gamma, static_cast<double>(f - 1 - t)) : r[i]);
    }
  } else if (cfg.kind == RewardKind::binary) {
    double mean = 0;
    for (const auto& t : g) mean += solved_turn(t) ? 1.0 : 0.0;
    mean /= static_cast<double>(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      reward[i] = solved_turn(g[i]) ? 1.0 : 0.0;
      adv[i].assign(g[i].size(), reward[i] - mean);
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
  return adv;
}

}  // namespace

std::vector<std::vector<double>> group_advantages(const std::vector<Trajectory>& g, const RewardConfig& cfg) {
  for (const auto& t : g)
    if (t.empty()) throw LeapError("a rollout without turns has no advantage");
  // A rollout whose last evaluation failed on leap's side (infra_error) is left out: no rank
  // against its peers, no reward, no advantage. The others are rewarded among themselves.
  std::vector<size_t> valid;
  for (size_t i = 0; i < g.size(); ++i)
    if (!g[i].back().infra) valid.push_back(i);
  if (valid.size() == g.size()) return advantages_of(g, cfg);
  std::vector<std::vector<double>> adv(g.size());
  for (size_t i = 0; i < g.size(); ++i) adv[i].assign(g[i].size(), 0.0);
  if (valid.size() < 2) return adv;
  std::vector<Trajectory> sub;
  for (size_t i : valid) sub.push_back(g[i]);
  auto a = advantages_of(sub, cfg);
  for (size_t k = 0; k < valid.size(); ++k) adv[valid[k]] = a[k];
  return adv;
}

}  // namespace leap
