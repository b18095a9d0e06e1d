// `leap report`: a run directory (or several, compared) as one HTML page with inline SVG charts.
#pragma once
#include <string>
#include <vector>

namespace leap {

struct ReportArgs {
  std::string run_dir;
  std::vector<std::string> compare;
  std::string out;  // "" = RUN_DIR/report.html
  std::string memory;  // an experience graph to draw ("" = RUN_DIR/memory.db when there is one)
};

int run_report(const ReportArgs& args);  // the page's exit code (usage errors are LeapError)

}  // namespace leap
