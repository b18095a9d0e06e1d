#include "report/forest.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <vector>

#include "memory/memory.h"
#include "memory/text.h"
#include "report/svg.h"

namespace leap::report {
namespace {

// Improvements green, plateaus light, regressions warm, failures by kind, cheats red.
std::string color_of(const std::string& label) {
  if (label == "first_pass") return "#1f77b4";
  if (label == "improvement") return "#2ca02c";
  if (label == "marginal") return "#98df8a";
  if (label == "slight_regression") return "#ffbb78";
  if (label == "regression") return "#ff7f0e";
  if (label.rfind("cheat_detected", 0) == 0) return "#d62728";
  if (label.rfind("wrong_answer", 0) == 0) return "#9467bd";
  if (label.rfind("timeout", 0) == 0) return "#8c564b";
  if (label.rfind("runtime_error", 0) == 0) return "#e377c2";
  return "#9e9e9e";  // compile_error and the rest
}

// A solid line from each case to the one it refined, a dashed one from each case its context
// showed (retrieved; the older style: a predecessor taken from the context).
std::string edges(const std::vector<const memory::RankedCase*>& cases, std::map<int64_t, std::pair<double, double>>& at,
                  const Frame& f) {
  std::string s;
  auto line = [&](int64_t from, int64_t to, const char* style) {
    auto [x0, y0] = at[from];
    auto [x1, y1] = at[to];
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" {}/>\n", f.px(x0), f.py(y0),
                     f.px(x1), f.py(y1), style);
  };
  for (auto* c : cases) {
    if (c->c.predecessor && at.count(c->c.predecessor))
      line(c->c.predecessor, c->c.id,
           c->c.relation == "retrieved" ? "stroke=\"#999\" stroke-dasharray=\"3,3\"" : "stroke=\"#999\"");
    for (int64_t r : c->c.retrieved)
      if (r != c->c.predecessor && at.count(r)) line(r, c->c.id, "stroke=\"#bbb\" stroke-dasharray=\"3,3\"");
  }
  return s;
}

std::string forest_chart(const std::string& task, const std::vector<memory::RankedCase>& ranked, int max_cases) {
  // The oldest cases: ids grow with time, and a predecessor is always older than its successor.
  std::vector<const memory::RankedCase*> cases;
  for (const auto& r : ranked) cases.push_back(&r);
  std::sort(cases.begin(), cases.end(), [](auto* a, auto* b) { return a->c.id < b->c.id; });
  const size_t shown = std::min(cases.size(), static_cast<size_t>(max_cases));
  cases.resize(shown);
  std::map<int64_t, const memory::RankedCase*> by_id;
  for (auto* c : cases) by_id[c->c.id] = c;
  std::map<int64_t, std::vector<int64_t>> children;
  std::vector<int64_t> roots;
  for (auto* c : cases) {
    if (c->c.predecessor != 0 && by_id.count(c->c.predecessor)) children[c->c.predecessor].push_back(c->c.id);
    else roots.push_back(c->c.id);
  }
  // Tidy layout: depth on x, leaves on successive rows, a parent at the mean of its children.
  std::map<int64_t, std::pair<double, double>> at;  // id -> (depth, row)
  double next_row = 0, max_depth = 0;
  std::function<double(int64_t, int)> place = [&](int64_t id, int depth) {
    max_depth = std::max(max_depth, static_cast<double>(depth));
    double row;
    auto it = children.find(id);
    if (it == children.end()) {
      row = next_row++;
    } else {
      double sum = 0;
      for (auto ch : it->second) sum += place(ch, depth + 1);
      row = sum / static_cast<double>(it->second.size());
    }
    at[id] = {static_cast<double>(depth), row};
    return row;
  };
  for (auto r : roots) place(r, 0);
  Frame f;
  // 16 px a row however many cases: a tall graph scrolls, a squeezed one cannot be read.
  f.H = f.T + f.B + 16 * std::max(1.0, next_row);
  f.x0 = -0.3;
  f.x1 = std::max(1.0, max_depth) + 0.3;
  f.y0 = -0.5;
  f.y1 = next_row - 0.5;
  for (auto& [id, xy] : at) xy.second = next_row - 1 - xy.second;  // the first trees on top
  std::string title = fmt::format("Experience graph of {}: {} cases{} in {} trees", task, shown,
                                  shown < ranked.size() ? fmt::format(" of {}", ranked.size()) : "", roots.size());
  std::string s = open_svg("forest-" + task, title, f, "refinement depth (the case it refined is to the left)", "",
                           false, false);
  for (int d = 0; d <= static_cast<int>(max_depth); ++d)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{}</text>", f.px(d),
                     f.H - f.B + 16, d);
  s += edges(cases, at, f);
  std::map<std::string, std::string> legend_colors;
  for (auto* c : cases) {
    auto [x, y] = at[c->c.id];
    const std::string label = c->label.empty() ? to_string(c->c.status) : c->label;
    legend_colors[label] = color_of(label);
    const double r = c->c.status == Status::ok ? 4 + std::min(4.0, 2 * std::max(0.0, c->c.speedup)) : 3.5;
    s += fmt::format(
        "<circle class=\"mark\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{:.1f}\" fill=\"{}\"><title>case {} (turn {}): {}, "
        "{}{}{}{}</title></circle>\n",
        f.px(x), f.py(y), r, color_of(label), c->c.id, c->c.turn, esc(label), esc(to_string(c->c.status)),
        c->c.status == Status::ok ? fmt::format(", speedup {:.2f}x", c->c.speedup) : "",
        c->c.decision.empty() ? "" : "\n" + esc(c->c.decision),
        // A correct case's feedback is its profile ([eval] profile): the counters' summary line.
        c->c.status == Status::ok && !c->c.feedback.empty() ? "\n" + esc(memory::detail::first_line(c->c.feedback)) : "");
  }
  std::vector<std::pair<std::string, std::string>> legend(legend_colors.begin(), legend_colors.end());
  return s + close_svg(legend);
}

}  // namespace

std::string forest_charts(const std::string& db_path, int max_tasks, int max_cases) {
  memory::Memory m(db_path, false);
  std::vector<std::pair<size_t, std::string>> tasks;
  for (const auto& t : m.tasks()) tasks.emplace_back(m.cases(t).size(), t);
  std::sort(tasks.begin(), tasks.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  if (tasks.empty()) return "";
  std::string html = "<h2>Experience graph</h2>\n<p>" + esc(db_path) +
                     ": every case is an attempt; a line joins it to the attempt it refined (dashed: a case "
                     "retrieved into its context); larger circles are faster kernels.</p>\n";
  for (size_t i = 0; i < tasks.size() && i < static_cast<size_t>(max_tasks); ++i)
    html += "<figure>" + forest_chart(tasks[i].second, m.ranked(tasks[i].second), max_cases) + "</figure>\n";
  return html;
}

}  // namespace leap::report
