// SVG building blocks of the report: escaping, a chart frame, axes, legend (HTML under the chart,
// never over its data), polylines.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace leap::report {

std::string esc(const std::string& s);

extern const char* const kTurnColors[6];
extern const char* const kDashes[4];

// A chart frame: plot area [L, W-R] x [T, H-B], data space [x0, x1] x [y0, y1].
struct Frame {
  double W = 720, H = 300, L = 56, R = 16, T = 34, B = 44;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool whole_x = false;  // x counts something whole (steps, depths): ticks on whole numbers only
  double px(double x) const;
  double py(double y) const;
};

std::string open_svg(const std::string& id, const std::string& title, const Frame& f, const std::string& xlabel,
                     const std::string& ylabel, bool x_ticks = true, bool y_ticks = true);
std::string close_svg(const std::vector<std::pair<std::string, std::string>>& legend,
                      const std::vector<std::string>& dashes = {});
std::string polyline(const std::vector<double>& xs, const std::vector<double>& ys, const Frame& f, const std::string& color,
                     const std::string& dash);

}  // namespace leap::report
