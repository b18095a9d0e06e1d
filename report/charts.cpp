#include "report/charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "report/svg.h"

namespace leap::report {

using nlohmann::json;

// A step's share of the run's wall-clock: the time since the previous step's record (steps overlap
// under [run] max_staleness, so their own walls would count twice); wall_s in older runs.
double step_seconds(const json& m) { return m.value("interval_s", m.value("wall_s", 0.0)); }

// Solve rate at each turn against step or cumulative wall-clock; runs differ by dash.
std::string solve_chart(const std::vector<Run>& runs, bool vs_wall) {
  Frame f;
  f.y1 = 1;
  size_t turns = 0;
  for (const auto& r : runs) {
    double wall = 0;
    for (const auto& m : r.metrics) {
      wall += step_seconds(m);
      turns = std::max(turns, m["solve_at"].size());
    }
    f.x1 = std::max(f.x1, vs_wall ? wall : static_cast<double>(r.metrics.size()));
  }
  f.x0 = vs_wall ? 0 : 1;
  f.whole_x = !vs_wall;
  std::string s = open_svg(vs_wall ? "solve-vs-wall" : "solve-vs-step",
                           vs_wall ? "Solve rate at each turn vs wall-clock" : "Solve rate at each turn vs step", f,
                           vs_wall ? "wall-clock (s, sum of steps)" : "step", "solve rate");
  std::vector<std::pair<std::string, std::string>> legend;
  std::vector<std::string> dashes;
  for (size_t k = 0; k < runs.size(); ++k) {
    for (size_t t = 0; t < turns; ++t) {
      std::vector<double> xs, ys;
      double wall = 0;
      for (const auto& m : runs[k].metrics) {
        wall += step_seconds(m);
        if (t >= m["solve_at"].size()) continue;
        xs.push_back(vs_wall ? wall : m["step"].get<double>() + 1);
        ys.push_back(m["solve_at"][t].get<double>());
      }
      s += polyline(xs, ys, f, kTurnColors[t % 6], kDashes[k % 4]);
      legend.push_back({(runs.size() > 1 ? runs[k].name + " " : "") + fmt::format("turn {}", t + 1), kTurnColors[t % 6]});
      dashes.push_back(kDashes[k % 4]);
    }
  }
  return s + close_svg(legend, dashes);
}

// Groups per step that DCP found easy, medium (refined) or hopeless, or could not judge (voided);
// runs side by side.
std::string dcp_chart(const std::vector<Run>& runs) {
  Frame f;
  size_t steps = 0;
  double most = 1;
  for (const auto& r : runs) {
    steps = std::max(steps, r.metrics.size());
    for (const auto& m : r.metrics) {
      const auto& d = m["dcp"];
      most = std::max(most, d.value("easy", 0.0) + d.value("medium", 0.0) + d.value("hopeless", 0.0) + d.value("voided", 0.0));
    }
  }
  f.x0 = 0.5;
  f.x1 = static_cast<double>(steps) + 0.5;
  f.y1 = most;
  f.whole_x = true;
  std::string s = open_svg("dcp-split", "DCP split per step (groups: easy / medium, refined / hopeless / voided)", f, "step",
                           "groups");
  const char* colors[] = {"#2ca02c", "#ff7f0e", "#7f7f7f", "#d62728"};
  const double slot = (f.px(1.5) - f.px(0.5)) * 0.8, w = slot / static_cast<double>(runs.size());
  for (size_t k = 0; k < runs.size(); ++k)
    for (const auto& m : runs[k].metrics) {
      double x = f.px(m["step"].get<double>() + 1) - slot / 2 + w * static_cast<double>(k), base = 0;
      int c = 0;
      for (const char* key : {"easy", "medium", "hopeless", "voided"}) {
        double v = m["dcp"].value(key, 0.0);
        if (v > 0)
          s += fmt::format("<rect class=\"mark\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
                           "opacity=\"{}\"><title>{} step {}: {} {}</title></rect>",
                           x, f.py(base + v), std::max(w - 1, 1.0), f.py(base) - f.py(base + v), colors[c],
                           k == 0 ? 1.0 : 0.6, esc(runs[k].name), m["step"].get<int>() + 1, v, key);
        base += v;
        ++c;
      }
    }
  return s + close_svg({{"easy", colors[0]}, {"medium (refined)", colors[1]}, {"hopeless", colors[2]},
                        {"voided (infra_error)", colors[3]}});
}

std::string reward_histogram(const std::vector<Run>& runs) {
  std::vector<std::vector<double>> values(runs.size());
  double lo = 1e300, hi = -1e300;
  for (size_t k = 0; k < runs.size(); ++k)
    for (const auto& m : runs[k].metrics)
      for (const auto& r : m.value("rewards", json::array())) {
        values[k].push_back(r.get<double>());
        lo = std::min(lo, values[k].back());
        hi = std::max(hi, values[k].back());
      }
  if (lo > hi) lo = 0, hi = 1;
  if (hi - lo < 1e-9) hi = lo + 1;
  const int bins = 20;
  std::vector<std::vector<int>> counts(runs.size(), std::vector<int>(bins, 0));
  int most = 1;
  for (size_t k = 0; k < runs.size(); ++k)
    for (double v : values[k]) {
      int b = std::min(bins - 1, static_cast<int>((v - lo) / (hi - lo) * bins));
      most = std::max(most, ++counts[k][static_cast<size_t>(b)]);
    }
  Frame f;
  f.x0 = lo;
  f.x1 = hi;
  f.y1 = most;
  std::string s = open_svg("reward-histogram", "Reward histogram (every rollout of every step)", f, "reward", "rollouts");
  std::vector<std::pair<std::string, std::string>> legend;
  for (size_t k = 0; k < runs.size(); ++k) {
    const char* color = kTurnColors[k % 6];
    for (int b = 0; b < bins; ++b) {
      int c = counts[k][static_cast<size_t>(b)];
      if (!c) continue;
      double x0 = f.px(lo + (hi - lo) * b / bins), x1 = f.px(lo + (hi - lo) * (b + 1) / bins);
      s += fmt::format("<rect class=\"mark\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
                       "opacity=\"0.55\"><title>{}: {} rollouts</title></rect>",
                       x0, f.py(c), std::max(x1 - x0 - 1, 1.0), f.py(0) - f.py(c), color, esc(runs[k].name), c);
    }
    legend.push_back({runs[k].name, color});
  }
  return s + close_svg(legend);
}

namespace {

struct Span {
  double a, b;
};

// Merged length of spans (overlapping evaluations of one worker count once).
double covered(std::vector<Span> v) {
  std::sort(v.begin(), v.end(), [](const Span& x, const Span& y) { return x.a < y.a; });
  double total = 0, end = -1e300, start = 0;
  for (const auto& s : v) {
    if (s.a > end) {
      if (end > -1e300) total += end - start;
      start = s.a;
      end = s.b;
    } else {
      end = std::max(end, s.b);
    }
  }
  if (end > -1e300) total += end - start;
  return total;
}

struct WorkerStats {
  std::map<std::string, std::vector<Span>> spans;  // stage -> spans
  int outcomes = 0, hits = 0;
};

std::map<int, WorkerStats> worker_stats(const Run& r, double* t0, double* t1) {
  std::map<int, WorkerStats> w;
  *t0 = 1e300;
  *t1 = -1e300;
  for (const auto& o : r.outcomes) {
    if (!o.contains("span")) continue;
    auto& ws = w[o.value("worker", 0)];
    ++ws.outcomes;
    ws.hits += o.value("cache_hit", false);
    for (const char* stage : {"generate", "compile", "evaluate"}) {
      const auto& sp = o["span"][stage];
      double a = sp[0].get<double>(), b = sp[1].get<double>();
      if (a <= 0 || b < a) continue;
      ws.spans[stage].push_back({a, b});
      *t0 = std::min(*t0, a);
      *t1 = std::max(*t1, b);
    }
  }
  return w;
}

const std::map<std::string, std::string> kStageColors = {
    {"generate", "#9467bd"}, {"compile", "#ff7f0e"}, {"evaluate", "#1f77b4"}};

}  // namespace

std::string timeline_chart(const Run& r) {
  double t0, t1;
  auto w = worker_stats(r, &t0, &t1);
  Frame f;
  f.H = std::max(160.0, 70.0 + 46.0 * static_cast<double>(w.size()));
  f.x1 = w.empty() ? 1 : t1 - t0;
  f.y1 = static_cast<double>(std::max<size_t>(w.size(), 1));
  std::string s = open_svg("worker-timeline",
                           "Per-worker timeline of " + r.name + " (gaps: the worker's evaluator idle)", f,
                           "seconds since the first stage", "worker", true, false);
  int lane = 0;
  for (const auto& [rank, ws] : w) {
    double ytop = f.py(lane + 1) + 4, h = f.py(lane) - f.py(lane + 1) - 8;
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">rank {}</text>", f.L - 6,
                     ytop + h / 2 + 4, rank);
    // Rows in the lane: generate on top, compile (overlapping spans stacked thin), evaluate below.
    const std::map<std::string, std::pair<double, double>> rows = {
        {"generate", {0, 0.2}}, {"compile", {0.22, 0.36}}, {"evaluate", {0.62, 0.38}}};
    for (const auto& [stage, spans] : ws.spans) {
      auto [off, frac] = rows.at(stage);
      for (const auto& sp : spans)
        s += fmt::format("<rect class=\"mark\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\" "
                         "opacity=\"{}\"/>",
                         f.px(sp.a - t0), ytop + off * h, std::max(f.px(sp.b - t0) - f.px(sp.a - t0), 0.6), frac * h,
                         kStageColors.at(stage), stage == "compile" ? 0.35 : 0.9);
    }
    ++lane;
  }
  return s + close_svg({{"generate", kStageColors.at("generate")}, {"compile", kStageColors.at("compile")},
                        {"evaluate", kStageColors.at("evaluate")}});
}

std::string busy_chart(const std::vector<Run>& runs) {
  struct Bar {
    std::string label;
    double busy, hits;
  };
  std::vector<Bar> bars;
  for (const auto& r : runs) {
    double t0, t1;
    for (const auto& [rank, ws] : worker_stats(r, &t0, &t1)) {
      auto it = ws.spans.find("evaluate");
      double busy = it == ws.spans.end() || t1 <= t0 ? 0 : covered(it->second) / (t1 - t0);
      bars.push_back({(runs.size() > 1 ? r.name + " " : "") + fmt::format("rank {}", rank), busy,
                      ws.outcomes ? static_cast<double>(ws.hits) / ws.outcomes : 0});
    }
  }
  Frame f;
  f.x0 = 0;
  f.x1 = static_cast<double>(std::max<size_t>(bars.size(), 1));
  f.y1 = 1;
  std::string s = open_svg("evaluator-busy", "Evaluator busy fraction and compile cache hits per worker", f,
                           "worker", "fraction", false, true);
  for (size_t i = 0; i < bars.size(); ++i) {
    double x = f.px(static_cast<double>(i)), slot = f.px(static_cast<double>(i) + 1) - x, w = slot * 0.35;
    s += fmt::format("<rect class=\"mark\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#1f77b4\">"
                     "<title>{}: evaluator busy {:.0f}%</title></rect>",
                     x + slot * 0.12, f.py(bars[i].busy), w, f.py(0) - f.py(bars[i].busy), esc(bars[i].label),
                     100 * bars[i].busy);
    s += fmt::format("<rect class=\"mark\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#ff7f0e\">"
                     "<title>{}: cache hits {:.0f}%</title></rect>",
                     x + slot * 0.12 + w, f.py(bars[i].hits), w, f.py(0) - f.py(bars[i].hits), esc(bars[i].label),
                     100 * bars[i].hits);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{}</text>", x + slot / 2,
                     f.H - f.B + 30, esc(bars[i].label));
  }
  return s + close_svg({{"evaluator busy", "#1f77b4"}, {"compile cache hits", "#ff7f0e"}});
}

std::string summary_table(const std::vector<Run>& runs) {
  std::string s =
      "<table><tr><th>run</th><th>steps</th><th>wall s</th><th>evaluations</th><th>solve@1 (last step)</th>"
      "<th>solve@T (last step)</th><th>cache hits</th><th>rollout-turns by staleness</th><th>outcomes</th></tr>";
  for (const auto& r : runs) {
    double wall = 0, evals = 0;
    for (const auto& m : r.metrics) {
      wall += step_seconds(m);
      evals += m.value("evaluations", 0.0);
    }
    std::map<std::string, int> statuses;
    int hits = 0;
    for (const auto& o : r.outcomes) {
      statuses[o.value("status", "?")]++;
      hits += o.value("cache_hit", false);
    }
    std::string st;
    for (const auto& [k, v] : statuses) st += fmt::format("{} {}, ", k, v);
    std::vector<uint64_t> stale;  // [run] max_staleness: how far behind the generating weights were
    for (const auto& m : r.metrics)
      if (m.contains("staleness"))
        for (size_t i = 0; i < m["staleness"].size(); ++i) {
          if (stale.size() <= i) stale.resize(i + 1, 0);
          stale[i] += m["staleness"][i].get<uint64_t>();
        }
    std::string by_staleness;
    for (size_t i = 0; i < stale.size(); ++i) by_staleness += fmt::format("{}{}: {}", i ? ", " : "", i, stale[i]);
    const auto& last = r.metrics.back()["solve_at"];
    s += fmt::format("<tr><td>{}</td><td>{}</td><td>{:.1f}</td><td>{:.0f}</td><td>{:.2f}</td><td>{:.2f}</td>"
                     "<td>{:.0f}%</td><td>{}</td><td>{}</td></tr>",
                     esc(r.name), r.metrics.size(), wall, evals, last.front().get<double>(), last.back().get<double>(),
                     r.outcomes.empty() ? 0.0 : 100.0 * hits / static_cast<double>(r.outcomes.size()),
                     by_staleness.empty() ? "-" : by_staleness, esc(st.substr(0, st.size() > 2 ? st.size() - 2 : 0)));
  }
  return s + "</table>\n";
}

}  // namespace leap::report

namespace leap::report {
namespace {

// Runs grouped by variant, in the order they come.
std::vector<std::pair<std::string, std::vector<const Run*>>> by_variant(const std::vector<Run>& runs) {
  std::vector<std::pair<std::string, std::vector<const Run*>>> g;
  for (const auto& r : runs) {
    if (g.empty() || g.back().first != r.variant) g.push_back({r.variant, {}});
    g.back().second.push_back(&r);
  }
  return g;
}

}  // namespace

Spread spread_of(const std::vector<double>& v) {
  Spread s;
  s.n = v.size();
  if (v.empty()) return s;
  s.lo = *std::min_element(v.begin(), v.end());
  s.hi = *std::max_element(v.begin(), v.end());
  for (double x : v) s.mean += x / static_cast<double>(v.size());
  return s;
}

std::string mean_range(const Spread& s, const char* fmt_one) {
  if (s.n == 0) return "-";
  std::string m = fmt::format(fmt::runtime(fmt_one), s.mean);
  if (s.n == 1 || s.lo == s.hi) return m;
  return m + " [" + fmt::format(fmt::runtime(fmt_one), s.lo) + "-" + fmt::format(fmt::runtime(fmt_one), s.hi) + "]";
}

std::string grid_table(const std::vector<Run>& runs) {
  size_t turns = 0;
  for (const auto& r : runs)
    if (!r.held_out.empty()) turns = std::max(turns, r.held_out.back()["accuracy"].size());
  std::string s = "<h2>The grid: mean [min-max] over seeds</h2><table><tr><th>variant</th><th>seeds</th>";
  for (size_t t = 1; t <= turns; ++t) s += fmt::format("<th>held-out acc@{}</th>", t);
  s += "<th>evaluations</th><th>wall s</th></tr>";
  for (const auto& [variant, rs] : by_variant(runs)) {
    std::vector<std::vector<double>> acc(turns);
    std::vector<double> evals, wall;
    for (const Run* r : rs) {
      double e = 0, w = 0;
      for (const auto& m : r->metrics) e += m.value("evaluations", 0.0), w += step_seconds(m);
      evals.push_back(e);
      wall.push_back(w);
      if (r->held_out.empty()) continue;
      const auto& a = r->held_out.back()["accuracy"];
      for (size_t t = 0; t < turns && t < a.size(); ++t) acc[t].push_back(a[t].get<double>());
    }
    s += fmt::format("<tr><td>{}</td><td>{}</td>", esc(variant), rs.size());
    for (size_t t = 0; t < turns; ++t) s += "<td>" + mean_range(spread_of(acc[t]), "{:.2f}") + "</td>";
    s += "<td>" + mean_range(spread_of(evals), "{:.0f}") + "</td><td>" + mean_range(spread_of(wall), "{:.1f}") + "</td></tr>";
  }
  return s + "</table>\n";
}

std::string grid_chart(const std::vector<Run>& runs, bool last_turn) {
  Frame f;
  f.y1 = 1;
  size_t turns = 1;
  for (const auto& r : runs)
    for (const auto& h : r.held_out) {
      f.x1 = std::max(f.x1, h["step"].get<double>());
      turns = std::max(turns, h["accuracy"].size());
    }
  const size_t t = last_turn ? turns - 1 : 0;
  auto groups = by_variant(runs);
  f.whole_x = true;
  std::string s = open_svg(last_turn ? "grid-turn-last" : "grid-turn-1",
                           fmt::format("Held-out accuracy at turn {} vs step: mean and min-max over seeds", t + 1), f,
                           "training step", fmt::format("held-out accuracy (turn {})", t + 1));
  std::vector<std::pair<std::string, std::string>> legend;
  for (size_t k = 0; k < groups.size(); ++k) {
    const std::string color = kTurnColors[k % 6];
    std::map<double, std::vector<double>> at;  // step -> accuracy per seed
    for (const Run* r : groups[k].second)
      for (const auto& h : r->held_out)
        if (t < h["accuracy"].size()) at[h["step"].get<double>()].push_back(h["accuracy"][t].get<double>());
    if (at.empty()) continue;
    std::vector<double> xs, mean, lo, hi;
    for (const auto& [step, v] : at) {
      xs.push_back(step);
      double m = 0;
      for (double x : v) m += x / static_cast<double>(v.size());
      mean.push_back(m);
      lo.push_back(*std::min_element(v.begin(), v.end()));
      hi.push_back(*std::max_element(v.begin(), v.end()));
    }
    std::string band;
    for (size_t i = 0; i < xs.size(); ++i) band += fmt::format("{:.1f},{:.1f} ", f.px(xs[i]), f.py(hi[i]));
    for (size_t i = xs.size(); i-- > 0;) band += fmt::format("{:.1f},{:.1f} ", f.px(xs[i]), f.py(lo[i]));
    s += fmt::format("<polygon points=\"{}\" fill=\"{}\" fill-opacity=\"0.15\" stroke=\"none\"/>", band, color);
    s += polyline(xs, mean, f, color, "");
    legend.push_back({groups[k].first, color});
  }
  return s + close_svg(legend);
}

}  // namespace leap::report
