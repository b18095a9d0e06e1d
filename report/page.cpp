// `leap report RUN_DIR [--compare RUN_DIR ...]`: one self-contained report.html (inline SVG and
// CSS, no network) from a run's metrics.jsonl and outcomes.jsonl: solve rate at each turn vs
// step and vs wall-clock, DCP split per step, reward histogram, per-worker timeline of
// generate / compile / evaluate, evaluator busy fraction and compile cache hits per worker, and
// the experience graph of the run's memory (report/forest.h) when it has one.
// Compared runs are overlaid (dashed) on the charts that share axes.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "common/error.h"
#include "report/charts.h"
#include "report/forest.h"
#include "report/report.h"
#include "report/svg.h"

namespace leap {
namespace fs = std::filesystem;
using namespace report;
namespace {

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
  // A leap bench dcp folder: the grid over every seed, and the per-run charts for the first seed
  // of every variant.
  std::vector<Run> all;
  if (is_bench_dir(a.run_dir)) all = load_bench(a.run_dir);
  std::vector<Run> runs;
  for (const auto& r : all)
    if (runs.empty() || runs.back().variant != r.variant) runs.push_back(r);
  if (all.empty()) runs.push_back(load_run(a.run_dir));
  for (const auto& d : a.compare) runs.push_back(load_run(d));
  std::string out = a.out.empty() ? a.run_dir + "/report.html" : a.out;
  std::string html = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>leap report: " + esc(runs[0].name) +
                     "</title><style>body{font-family:sans-serif;margin:24px;color:#222}figure{margin:12px 0}"
                     ".t{font-size:14px;font-weight:bold}.tick{font-size:10px;fill:#555}.lab{font-size:11px;fill:#333}"
                     ".legend{font-size:11px;margin:0 0 0 56px;max-width:660px}.legend .li{margin-right:14px;white-space:nowrap;"
                     "display:inline-block}.legend svg{vertical-align:middle;margin-right:4px}.ax{stroke:#333}.grid{stroke:#e4e4e4}table{border-collapse:collapse}"
                     "td,th{border:1px solid #ccc;padding:3px 8px;font-size:12px}</style></head><body>\n";
  html += "<h1>leap report: " + esc(runs[0].name) + "</h1>\n<p>" + esc(runs[0].dir) +
          (runs.size() > 1 ? " compared with " + std::to_string(runs.size() - 1) + " run(s) (dashed)" : "") + "</p>\n";
  int charts = 6;
  if (!all.empty()) {
    html += grid_table(all);
    html += grid_chart(all, true);
    html += grid_chart(all, false);
    charts += 2;
  }
  html += summary_table(runs);
  html += solve_chart(runs, false);
  html += solve_chart(runs, true);
  html += dcp_chart(runs);
  html += reward_histogram(runs);
  html += timeline_chart(runs[0]);
  html += busy_chart(runs);
  // The experience graph: --memory, or the run's own (a run with [memory] record = true).
  const std::string db = !a.memory.empty() ? a.memory : a.run_dir + "/memory.db";
  int forests = 0;
  if (!a.memory.empty() || fs::exists(db)) {
    std::string f = forest_charts(db);
    for (size_t at = f.find("data-chart=\"forest-"); at != std::string::npos; at = f.find("data-chart=\"forest-", at + 1))
      ++forests;
    html += f;
    charts += forests;
  }
  html += kCheckScript;
  html += "</body></html>\n";
  std::string tmp = out + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary);
    o << html;
    if (!o) throw LeapError("cannot write " + tmp);
  }
  fs::rename(tmp, out);
  std::cout << "leap report: wrote " << out << " (" << (all.empty() ? runs.size() : all.size()) << " run(s), " << charts
            << " charts)\n";
  return 0;
}

}  // namespace leap
