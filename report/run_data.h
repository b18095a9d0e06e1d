// A run directory as the report reads it: its metrics.jsonl and outcomes.jsonl.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace leap::report {

struct Run {
  std::string name, dir;
  std::string variant;  // leap bench dcp: the variant of a VARIANT/seed-K run, else the name
  std::vector<nlohmann::json> metrics, outcomes;
  std::vector<nlohmann::json> held_out;  // leap bench dcp's held-out evaluations, if any
};

// Throws LeapError saying what is missing.
Run load_run(const std::string& dir);

// A `leap bench dcp` output folder (bench.json, VARIANT/seed-K/): every run, in the grid's order.
bool is_bench_dir(const std::string& dir);
std::vector<Run> load_bench(const std::string& dir);

}  // namespace leap::report
