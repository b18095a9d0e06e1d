// `leap report RUN_DIR [--compare RUN_DIR ...]`: one self-contained report.html (inline SVG and
// CSS, no network) from a run's metrics.jsonl and outcomes.jsonl: solve rate at each turn vs
// step and vs wall-clock, DCP split per step, reward histogram, per-worker timeline of
// generate / compile / evaluate, evaluator busy fraction and compile cache hits per worker.
// Compared runs are overlaid (dashed) on the charts that share axes.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "common/error.h"
#include "common/run_dir.h"

namespace leap {
namespace fs = std::filesystem;
namespace {

using nlohmann::json;

struct Run {
  std::string name, dir;
  std::vector<json> metrics, outcomes;
};

Run load_run(const std::string& dir) {
  if (!fs::exists(dir + "/metrics.jsonl"))
    throw LeapError(dir + " is not a run directory: metrics.jsonl is missing (leap run --run-dir writes it)");
  Run r;
  r.dir = dir;
  r.name = fs::path(dir).lexically_normal().filename().string();
  if (r.name.empty()) r.name = fs::path(dir).lexically_normal().parent_path().filename().string();
  r.metrics = read_jsonl(dir + "/metrics.jsonl");
  if (fs::exists(dir + "/outcomes.jsonl")) r.outcomes = read_jsonl(dir + "/outcomes.jsonl");
  if (r.metrics.empty()) throw LeapError(dir + "/metrics.jsonl has no completed step yet");
  return r;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

const char* const kTurnColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
const char* const kDashes[] = {"", "6 3", "2 3", "8 3 2 3"};

// A chart frame: plot area [L, W-R] x [T, H-B], data space [x0, x1] x [y0, y1].
struct Frame {
  double W = 720, H = 300, L = 56, R = 16, T = 34, B = 44;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  double px(double x) const { return L + (x - x0) / std::max(x1 - x0, 1e-12) * (W - L - R); }
  double py(double y) const { return H - B - (y - y0) / std::max(y1 - y0, 1e-12) * (H - T - B); }
};

std::string open_svg(const std::string& id, const std::string& title, const Frame& f, const std::string& xlabel,
                     const std::string& ylabel, bool x_ticks = true, bool y_ticks = true) {
  std::string s = fmt::format(
      "<figure><svg class=\"chart\" data-chart=\"{}\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
      "xmlns=\"http://www.w3.org/2000/svg\"><title>{}</title>"
      "<text x=\"{}\" y=\"20\" class=\"t\">{}</text>",
      id, f.W, f.H, f.W, f.H, esc(title), f.L, esc(title));
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"ax\"/>", f.L, f.H - f.B, f.W - f.R);
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" class=\"ax\"/>", f.L, f.T, f.H - f.B);
  for (int i = 0; i <= 4; ++i) {
    double x = f.x0 + (f.x1 - f.x0) * i / 4, y = f.y0 + (f.y1 - f.y0) * i / 4;
    if (x_ticks)
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{:.3g}</text>", f.px(x),
                       f.H - f.B + 16, x);
    if (y_ticks)
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{:.3g}</text>", f.L - 6,
                       f.py(y) + 4, y);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>", f.L, f.py(y),
                     f.W - f.R, f.py(y));
  }
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"lab\" text-anchor=\"middle\">{}</text>", (f.L + f.W - f.R) / 2,
                   f.H - 8, esc(xlabel));
  s += fmt::format("<text x=\"14\" y=\"{:.1f}\" class=\"lab\" transform=\"rotate(-90 14 {:.1f})\" "
                   "text-anchor=\"middle\">{}</text>",
                   (f.T + f.H - f.B) / 2, (f.T + f.H - f.B) / 2, esc(ylabel));
  return s;
}

std::string close_svg(const std::vector<std::pair<std::string, std::string>>& legend, const Frame& f,
                      const std::vector<std::string>& dashes = {}) {
  std::string s;
  double x = f.L + 8, row = 0;
  for (size_t i = 0; i < legend.size(); ++i) {
    const std::string dash = i < dashes.size() ? dashes[i] : "";
    const double width = 30 + 6.5 * static_cast<double>(legend[i].first.size());
    if (x + width > f.W - f.R && x > f.L + 8) {
      x = f.L + 8;
      row += 13;
    }
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"3\" "
                     "stroke-dasharray=\"{}\"/><text x=\"{:.1f}\" y=\"{:.1f}\" class=\"leg\">{}</text>",
                     x, f.T - 4.0 + row, x + 18, f.T - 4.0 + row, legend[i].second, dash, x + 22, f.T + row,
                     esc(legend[i].first));
    x += width;
  }
  return s + "</svg></figure>\n";
}

std::string polyline(const std::vector<double>& xs, const std::vector<double>& ys, const Frame& f, const std::string& color,
                     const std::string& dash) {
  std::string pts;
  for (size_t i = 0; i < xs.size(); ++i) pts += fmt::format("{:.1f},{:.1f} ", f.px(xs[i]), f.py(ys[i]));
  std::string s = fmt::format("<polyline class=\"mark\" points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
                              "stroke-dasharray=\"{}\"/>",
                              pts, color, dash);
  for (size_t i = 0; i < xs.size(); ++i)
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>", f.px(xs[i]), f.py(ys[i]), color);
  return s;
}

// Solve rate at each turn against step or cumulative wall-clock; runs differ by dash.
std::string solve_chart(const std::vector<Run>& runs, bool vs_wall) {
  Frame f;
  f.y1 = 1;
  size_t turns = 0;
  for (const auto& r : runs) {
    double wall = 0;
    for (const auto& m : r.metrics) {
      wall += m.value("wall_s", 0.0);
      turns = std::max(turns, m["solve_at"].size());
    }
    f.x1 = std::max(f.x1, vs_wall ? wall : static_cast<double>(r.metrics.size()));
  }
  f.x0 = vs_wall ? 0 : 1;
  f.T = 34 + 13.0 * static_cast<double>((runs.size() * turns) / 4);
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
        wall += m.value("wall_s", 0.0);
        if (t >= m["solve_at"].size()) continue;
        xs.push_back(vs_wall ? wall : m["step"].get<double>() + 1);
        ys.push_back(m["solve_at"][t].get<double>());
      }
      s += polyline(xs, ys, f, kTurnColors[t % 6], kDashes[k % 4]);
      legend.push_back({(runs.size() > 1 ? runs[k].name + " " : "") + fmt::format("turn {}", t + 1), kTurnColors[t % 6]});
      dashes.push_back(kDashes[k % 4]);
    }
  }
  return s + close_svg(legend, f, dashes);
}

// Groups per step that DCP found easy, medium (refined) or hopeless; runs side by side.
std::string dcp_chart(const std::vector<Run>& runs) {
  Frame f;
  size_t steps = 0;
  double most = 1;
  for (const auto& r : runs) {
    steps = std::max(steps, r.metrics.size());
    for (const auto& m : r.metrics) {
      const auto& d = m["dcp"];
      most = std::max(most, d.value("easy", 0.0) + d.value("medium", 0.0) + d.value("hopeless", 0.0));
    }
  }
  f.x0 = 0.5;
  f.x1 = static_cast<double>(steps) + 0.5;
  f.y1 = most;
  std::string s = open_svg("dcp-split", "DCP split per step (groups: easy / medium, refined / hopeless)", f, "step",
                           "groups");
  const char* colors[] = {"#2ca02c", "#ff7f0e", "#7f7f7f"};
  const double slot = (f.px(1.5) - f.px(0.5)) * 0.8, w = slot / static_cast<double>(runs.size());
  for (size_t k = 0; k < runs.size(); ++k)
    for (const auto& m : runs[k].metrics) {
      double x = f.px(m["step"].get<double>() + 1) - slot / 2 + w * static_cast<double>(k), base = 0;
      int c = 0;
      for (const char* key : {"easy", "medium", "hopeless"}) {
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
  return s + close_svg({{"easy", colors[0]}, {"medium (refined)", colors[1]}, {"hopeless", colors[2]}}, f);
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
  return s + close_svg(legend, f);
}

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
                        {"evaluate", kStageColors.at("evaluate")}},
                       f);
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
  return s + close_svg({{"evaluator busy", "#1f77b4"}, {"compile cache hits", "#ff7f0e"}}, f);
}

std::string summary_table(const std::vector<Run>& runs) {
  std::string s =
      "<table><tr><th>run</th><th>steps</th><th>wall s</th><th>evaluations</th><th>solve@1 (last step)</th>"
      "<th>solve@T (last step)</th><th>cache hits</th><th>outcomes</th></tr>";
  for (const auto& r : runs) {
    double wall = 0, evals = 0;
    for (const auto& m : r.metrics) {
      wall += m.value("wall_s", 0.0);
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
    const auto& last = r.metrics.back()["solve_at"];
    s += fmt::format("<tr><td>{}</td><td>{}</td><td>{:.1f}</td><td>{:.0f}</td><td>{:.2f}</td><td>{:.2f}</td>"
                     "<td>{:.0f}%</td><td>{}</td></tr>",
                     esc(r.name), r.metrics.size(), wall, evals, last.front().get<double>(), last.back().get<double>(),
                     r.outcomes.empty() ? 0.0 : 100.0 * hits / static_cast<double>(r.outcomes.size()),
                     esc(st.substr(0, st.size() > 2 ? st.size() - 2 : 0)));
  }
  return s + "</table>\n";
}

// Marks the page with how many charts the browser laid out with a non-empty box.
const char* const kCheckScript = R"(<script>
window.addEventListener('load', function () {
  var charts = document.querySelectorAll('svg.chart'), ok = 0;
  charts.forEach(function (c) {
    var box = c.getBoundingClientRect(), marks = c.querySelectorAll('.mark'), drawn = 0;
    marks.forEach(function (m) { var b = m.getBBox(); if (b.width > 0 || b.height > 0) drawn++; });
    c.setAttribute('data-marks-drawn', drawn);
    if (box.width > 0 && box.height > 0 && drawn > 0) ok++;
  });
  document.body.setAttribute('data-charts', charts.length);
  document.body.setAttribute('data-charts-rendered', ok);
});
</script>)";

}  // namespace

int run_report(const ReportArgs& a) {
  std::vector<Run> runs{load_run(a.run_dir)};
  for (const auto& d : a.compare) runs.push_back(load_run(d));
  std::string out = a.out.empty() ? a.run_dir + "/report.html" : a.out;
  std::string html = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>leap report: " + esc(runs[0].name) +
                     "</title><style>body{font-family:sans-serif;margin:24px;color:#222}figure{margin:12px 0}"
                     ".t{font-size:14px;font-weight:bold}.tick{font-size:10px;fill:#555}.lab{font-size:11px;fill:#333}"
                     ".leg{font-size:11px}.ax{stroke:#333}.grid{stroke:#e4e4e4}table{border-collapse:collapse}"
                     "td,th{border:1px solid #ccc;padding:3px 8px;font-size:12px}</style></head><body>\n";
  html += "<h1>leap report: " + esc(runs[0].name) + "</h1>\n<p>" + esc(runs[0].dir) +
          (runs.size() > 1 ? " compared with " + std::to_string(runs.size() - 1) + " run(s) (dashed)" : "") + "</p>\n";
  html += summary_table(runs);
  html += solve_chart(runs, false);
  html += solve_chart(runs, true);
  html += dcp_chart(runs);
  html += reward_histogram(runs);
  html += timeline_chart(runs[0]);
  html += busy_chart(runs);
  html += kCheckScript;
  html += "</body></html>\n";
  std::string tmp = out + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary);
    o << html;
    if (!o) throw LeapError("cannot write " + tmp);
  }
  fs::rename(tmp, out);
  std::cout << "leap report: wrote " << out << " (" << runs.size() << " run(s), 6 charts)\n";
  return 0;
}

}  // namespace leap
