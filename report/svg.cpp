#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace leap::report {

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

const char* const kTurnColors[6] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
const char* const kDashes[4] = {"", "6 3", "2 3", "8 3 2 3"};

double Frame::px(double x) const { return L + (x - x0) / std::max(x1 - x0, 1e-12) * (W - L - R); }
double Frame::py(double y) const { return H - B - (y - y0) / std::max(y1 - y0, 1e-12) * (H - T - B); }

std::string open_svg(const std::string& id, const std::string& title, const Frame& f, const std::string& xlabel,
                     const std::string& ylabel, bool x_ticks, bool y_ticks) {
  std::string s = fmt::format(
      "<figure><svg class=\"chart\" data-chart=\"{}\" data-whole-x=\"{}\" viewBox=\"0 0 {} {}\" width=\"{}\" "
      "height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\"><title>{}</title>"
      "<text x=\"{}\" y=\"20\" class=\"t\">{}</text>",
      id, f.whole_x ? 1 : 0, f.W, f.H, f.W, f.H, esc(title), f.L, esc(title));
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"ax\"/>", f.L, f.H - f.B, f.W - f.R);
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" class=\"ax\"/>", f.L, f.T, f.H - f.B);
  std::vector<double> xs;
  if (f.whole_x) {  // whole numbers only, at most ~6 of them
    const double first = std::ceil(f.x0 - 1e-9), last = std::floor(f.x1 + 1e-9);
    const double stride = std::max(1.0, std::ceil((last - first) / 6));
    for (double x = first; x <= last; x += stride) xs.push_back(x);
  } else {
    for (int i = 0; i <= 4; ++i) xs.push_back(f.x0 + (f.x1 - f.x0) * i / 4);
  }
  if (x_ticks)
    for (double x : xs)
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{:.3g}</text>", f.px(x),
                       f.H - f.B + 16, x);
  for (int i = 0; i <= 4; ++i) {
    double y = f.y0 + (f.y1 - f.y0) * i / 4;
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

std::string close_svg(const std::vector<std::pair<std::string, std::string>>& legend,
                      const std::vector<std::string>& dashes) {
  // The legend is HTML under the chart: it wraps with the page and never covers data.
  std::string s = "</svg>";
  if (!legend.empty()) {
    s += "<figcaption class=\"legend\">";
    for (size_t i = 0; i < legend.size(); ++i)
      s += fmt::format("<span class=\"li\"><svg width=\"22\" height=\"8\"><line x1=\"2\" y1=\"4\" x2=\"20\" y2=\"4\" "
                       "stroke=\"{}\" stroke-width=\"3\" stroke-dasharray=\"{}\"/></svg>{}</span>",
                       legend[i].second, i < dashes.size() ? dashes[i] : "", esc(legend[i].first));
    s += "</figcaption>";
  }
  return s + "</figure>\n";
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

}  // namespace leap::report
