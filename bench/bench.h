// The benchmarks `leap bench` runs in-process: LEAP's DCP grid and compile-latency hiding. Each
// prints its table and the ratio against its baseline measured in the same run.
#pragma once
#include <string>
#include <vector>

namespace leap {

struct BenchDcpArgs {
  std::string config;     // "" = configs/demo.toml
  std::string out = "bench-dcp";
  int steps = 0;          // 0 = the config's
  int workers = 2;
  int seeds = 0;          // 0 = [bench] seeds
  double target = 0;      // held-out accuracy at turn T; 0 = [bench] target
  double target_turn1 = 0;  // at turn 1; 0 = [bench] target_turn1
  int eval_every = 0;     // 0 = [bench] eval_every
  int held_out = 0;       // 0 = [bench] held_out
  std::vector<std::string> variants;  // empty = the whole grid
  int jobs = 1;           // runs at once, each a process of its own
  std::string run_one;    // VARIANT:SEED: that run only (what --jobs starts)
  std::vector<int> cores; // with run_one: the CPUs that run keeps to (its share of the machine)
  bool summarize = false; // no runs: the table and report of the runs already in --out
};

struct BenchCompileHidingArgs {
  std::string config;          // "" = configs/demo.toml (cpu) or configs/demo-cuda.toml (cuda)
  std::string backend = "cpu";
  int count = 64;              // distinct candidates
  int baseline = 2;            // candidates built with load_inline; 0 = none
  std::string python = "python3";
  // serial, farm-then-eval, pipelined (pipelined-warm comes with it): all by default; fewer for a
  // quick look at one mode (without serial the "vs serial" column is empty)
  std::vector<std::string> modes = {"serial", "farm-then-eval", "pipelined"};
  std::string records;  // "": none; else every mode's outcomes as JSONL, each with its "mode"
};

int run_bench_dcp(const BenchDcpArgs& args);
int run_bench_compile_hiding(const BenchCompileHidingArgs& args);

}  // namespace leap
