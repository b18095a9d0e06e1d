#include "report/run_data.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/run_dir.h"

namespace leap::report {
namespace fs = std::filesystem;

Run load_run(const std::string& dir) {
  if (!fs::exists(dir + "/metrics.jsonl"))
    throw LeapError(dir + " is not a run directory: metrics.jsonl is missing (leap run --run-dir writes it)");
  Run r;
  r.dir = dir;
  r.name = fs::path(dir).lexically_normal().filename().string();
  if (r.name.empty()) r.name = fs::path(dir).lexically_normal().parent_path().filename().string();
  // leap bench dcp's VARIANT/seed-K: named by both.
  if (r.name.rfind("seed-", 0) == 0)
    r.name = fs::path(dir).lexically_normal().parent_path().filename().string() + "/" + r.name;
  r.metrics = read_jsonl(dir + "/metrics.jsonl");
  if (fs::exists(dir + "/outcomes.jsonl")) r.outcomes = read_jsonl(dir + "/outcomes.jsonl");
  if (r.metrics.empty()) throw LeapError(dir + "/metrics.jsonl has no completed step yet");
  r.variant = r.name.substr(0, r.name.find("/seed-"));
  if (fs::exists(dir + "/held_out.jsonl")) r.held_out = read_jsonl(dir + "/held_out.jsonl");
  return r;
}

bool is_bench_dir(const std::string& dir) { return fs::exists(fs::path(dir) / "bench.json"); }

std::vector<Run> load_bench(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "bench.json");
  auto meta = nlohmann::json::parse(in, nullptr, false);
  if (meta.is_discarded() || !meta.contains("variants")) throw LeapError(dir + "/bench.json is not leap bench dcp's");
  std::vector<Run> runs;
  for (const auto& v : meta["variants"]) {
    std::vector<std::string> seeds;
    for (const auto& e : fs::directory_iterator(fs::path(dir) / v.get<std::string>()))
      if (e.is_directory() && e.path().filename().string().rfind("seed-", 0) == 0) seeds.push_back(e.path().string());
    std::sort(seeds.begin(), seeds.end());
    for (const auto& s : seeds) runs.push_back(load_run(s));
  }
  if (runs.empty()) throw LeapError(dir + ": no VARIANT/seed-K runs");
  return runs;
}

}  // namespace leap::report
