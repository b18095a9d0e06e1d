// leap report: a run directory as one HTML page (report/).
#include <CLI/CLI.hpp>

#include <memory>

#include "apps/commands.h"
#include "report/report.h"

namespace leap {

void add_report_command(CLI::App& app, Commands& c) {
  auto rp = std::make_shared<ReportArgs>();
  auto* report = app.add_subcommand("report", "write a self-contained report.html of a run (and runs to compare)");
  report->add_option("run_dir", rp->run_dir, "run directory (leap run --run-dir)")->required();
  report->add_option("--compare", rp->compare, "further run directories, overlaid");
  report->add_option("--out", rp->out, "output file (default: RUN_DIR/report.html)");
  report->add_option("--memory", rp->memory, "memory database whose experience graph to draw (default: RUN_DIR/memory.db)");
  c.add(report, [rp] { return run_report(*rp); });
}

}  // namespace leap
