// The report's charts and its summary table, each a self-contained HTML/SVG fragment.
#pragma once
#include <string>
#include <vector>

#include "report/run_data.h"

namespace leap::report {

// A figure over seeds: "mean" or "mean [min-max]" ("-" for none), each printed with `fmt_one`;
// the grid table and leap bench dcp's table print the same.
struct Spread {
  double mean = 0, lo = 0, hi = 0;
  size_t n = 0;
};
Spread spread_of(const std::vector<double>& v);
std::string mean_range(const Spread& s, const char* fmt_one);

std::string solve_chart(const std::vector<Run>& runs, bool vs_wall);  // solve rate by turn vs step or wall-clock
std::string dcp_chart(const std::vector<Run>& runs);                  // DCP split per step
std::string reward_histogram(const std::vector<Run>& runs);
std::string timeline_chart(const Run& r);                             // per-worker generate/compile/evaluate
std::string busy_chart(const std::vector<Run>& runs);                 // evaluator busy fraction, cache hits
std::string summary_table(const std::vector<Run>& runs);
// leap bench dcp's grid: held-out accuracy (turn 1 or T) vs step, mean line and min-max band per
// variant over its seeds; and the table of final figures.
std::string grid_chart(const std::vector<Run>& runs, bool last_turn);
std::string grid_table(const std::vector<Run>& runs);

}  // namespace leap::report
