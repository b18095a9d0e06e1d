// Benchmark: evaluator overhead per candidate, compile-cache hit cost, and `leap eval` wall
// time over the built-in suite, cold and warm. Baselines measured in the same run: a fresh
// evaluator process per candidate (no warm pool) and a cold compile (no cache).
//
//   build/bench/leap-bench-eval [--candidates DIR] [--fresh N]
//
// Overhead = a candidate's evaluation wall time as the worker sees it, minus the candidate's
// own timed calls (warm-up included) and minus compilation.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <thread>
#include <map>
#include <atomic>
#include <filesystem>

#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/paths.h"
#include "evaluation/eval_pipeline.h"

namespace leap {
namespace {

using bench::Dist;
using bench::dist;

std::vector<double> overheads_ms(const std::vector<EvalOutcome>& outs) {
  std::vector<double> v;
  for (const auto& o : outs) v.push_back((o.stages.eval_us - o.stages.timing_us) / 1000.0);
  return v;
}

// The harness alone: also without the candidate's untimed correctness calls.
std::vector<double> harness_ms(const std::vector<EvalOutcome>& outs) {
  std::vector<double> v;
  for (const auto& o : outs)
    v.push_back((o.stages.eval_us - o.stages.timing_us - o.stages.candidate_calls_us) / 1000.0);
  return v;
}

void row(const std::string& what, const Dist& d, const std::string& unit) {
  fmt::print("{:<44} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f}  {}\n", what, d.p50, d.p90, d.max, d.mean, unit);
}

// How stable a CPU candidate's speedup is across independent evaluations (a fresh pipeline each,
// so the reference is timed again too), on an idle machine and beside `spinners` busy threads.
int stability(const LeapConfig& cfg, const std::shared_ptr<spdlog::logger>& log, int repeats, int spinners) {
  auto tasks = load_suite("builtin");
  std::vector<CandidateSource> cands;
  for (const char* f : {"relu.cpp", "softmax.cpp", "matmul.cpp"})
    cands.push_back(load_candidates(data_dir() + "/examples/cpu/" + f, Backend::cpu).at(0));
  fmt::print("\nleap-bench-eval --stability {}: the speedup of {} CPU examples over {} independent evaluations "
             "each (a fresh pipeline each: the reference is timed again), idle and beside {} spinning threads; "
             "{} cores\n\n",
             repeats, cands.size(), repeats, spinners, std::thread::hardware_concurrency());
  fmt::print("| candidate | machine | speedup p50 | min | max | CV % | not ok | CV / idle CV |\n"
             "|---|---|---:|---:|---:|---:|---:|---:|\n");
  std::map<std::string, double> idle_cv;
  for (int loaded = 0; loaded < 2; ++loaded) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> busy;
    for (int i = 0; loaded && i < spinners; ++i)
      busy.emplace_back([&] {
        while (!stop.load(std::memory_order_relaxed)) {
        }
      });
    std::map<std::string, std::vector<double>> speedups;
    std::map<std::string, int> not_ok;
    for (int r = 0; r < repeats; ++r) {
      EvalPipeline pipeline(cfg, Backend::cpu, evald_path(), log);
      for (const auto& o : pipeline.run(tasks, cands)) {
        if (o.status == Status::ok) speedups[o.task].push_back(o.speedup);
        else ++not_ok[o.task];
      }
    }
    stop = true;
    for (auto& t : busy) t.join();
    for (const auto& c : cands) {
      auto d = dist(speedups[c.task]);
      const std::string where = loaded ? fmt::format("{} spinning threads", spinners) : "idle";
      if (!loaded) idle_cv[c.task] = d.cv;
      const std::string ratio = loaded && idle_cv[c.task] > 0 ? fmt::format("{:.1f}x", d.cv / idle_cv[c.task]) : "1.0x";
      fmt::print("| {} | {} | {:.3f} | {:.3f} | {:.3f} | {:.1f} | {} | {} |\n", c.task, where, d.p50,
                 speedups[c.task].empty() ? 0.0 : *std::min_element(speedups[c.task].begin(), speedups[c.task].end()),
                 d.max, 100 * d.cv, not_ok[c.task], ratio);
    }
  }
  return 0;
}

}  // namespace

// Long: the benchmark reads as the tables it prints, each block measuring one row beside its baseline.
int bench_main(int argc, char** argv) {
  CLI::App app{"leap evaluation overhead benchmark"};
  std::string cand_dir = data_dir() + "/examples/cpu";
  size_t fresh_n = 8;
  bool detail = false;
  app.add_option("--candidates", cand_dir);
  app.add_option("--fresh", fresh_n, "candidates evaluated by the fresh-process baseline");
  app.add_flag("--detail", detail, "print the warm overhead of every candidate");
  int stability_repeats = 0, spinners = static_cast<int>(std::thread::hardware_concurrency());
  app.add_option("--stability", stability_repeats,
                 "only: the speedups of relu, softmax and matmul over this many independent evaluations, idle and loaded");
  app.add_option("--spinners", spinners, "busy threads beside the loaded --stability runs (default: one per core)");
  CLI11_PARSE(app, argc, argv);

  auto log = role_logger("bench");
  log->set_level(spdlog::level::warn);
  std::string cache = std::filesystem::temp_directory_path() / ("leap-bench-" + std::to_string(::getpid()));
  LeapConfig cfg;
  cfg.compile.cache_dir = cache;
  if (stability_repeats > 0) {
    const int rc = stability(cfg, log, stability_repeats, spinners);
    std::error_code ec;
    std::filesystem::remove_all(cache, ec);
    return rc;
  }
  auto tasks = load_suite("builtin");
  auto cands = load_candidates(cand_dir, Backend::cpu);

  // Cold: empty cache, evaluators starting, references never timed.
  auto t0 = Clock::now();
  auto pipeline = std::make_unique<EvalPipeline>(cfg, Backend::cpu, evald_path(), log);
  auto cold = pipeline->run(tasks, cands);
  double cold_s = micros_since(t0) / 1e6;
  // Warm: same process, cached compiles, warm evaluators, cached reference timings.
  t0 = Clock::now();
  auto warm = pipeline->run(tasks, cands);
  double warm_s = micros_since(t0) / 1e6;
  pipeline.reset();

  // Compile: cold compile vs cache hit of the same sources.
  CompileFarm farm(cfg.compile, make_cxx_driver(cfg.compile));
  std::vector<double> hit_ms, cold_ms;
  for (const auto& o : cold) cold_ms.push_back(o.stages.compile_us / 1000.0);
  for (int rep = 0; rep < 5; ++rep)
    for (const auto& c : cands) {
      auto r = farm.compile({c.name, c.source, Backend::cpu});
      if (r.cache_hit) hit_ms.push_back(r.compile_us / 1000.0);
    }

  // Baseline: a fresh evaluator process per candidate (what a harness without a warm pool pays).
  std::vector<EvalOutcome> fresh;
  std::vector<double> fresh_ms;
  std::map<std::string, const Task*> by_name;
  for (const auto& t : tasks) by_name[t.name] = &t;
  auto sandbox = cfg.sandbox;
  sandbox.spares = 0;
  for (size_t i = 0; i < std::min(fresh_n, warm.size()); ++i) {
    const auto& w = warm[i];
    auto lib = farm.compile({cands[i].name, cands[i].source, Backend::cpu}).library_path;
    auto s = Clock::now();
    EvaluatorSlot slot(evald_path(), Backend::cpu, sandbox, cfg.eval, log);
    EvalJob job{i, by_name.at(w.task), w.candidate, lib, &w.reference_timing};
    auto o = slot.evaluate(job);
    o.stages.eval_us = micros_since(s);
    fresh.push_back(o);
  }
  std::vector<EvalOutcome> warm_subset(warm.begin(), warm.begin() + static_cast<long>(fresh.size()));

  size_t ok = 0;
  for (const auto& o : warm) ok += o.status == Status::ok;
  if (detail)
    for (const auto& o : warm)
      fmt::print("{:<28} overhead {:7.1f} ms  candidate calls {:7.1f} ms  correctness {:7.1f} ms\n", o.task,
                 (o.stages.eval_us - o.stages.timing_us) / 1000.0, o.stages.candidate_calls_us / 1000.0,
                 o.stages.correctness_us / 1000.0);
  fmt::print("\nleap-bench-eval: {} candidates ({} ok), {} tasks, CPU backend, {} cores\n\n", cands.size(), ok,
             tasks.size(), std::thread::hardware_concurrency());
  fmt::print("{:<44} {:>9} {:>9} {:>9} {:>9}\n", "per candidate", "p50", "p90", "max", "mean");
  auto warm_over = dist(overheads_ms(warm));
  auto fresh_over = dist(overheads_ms(fresh));
  auto warm_sub = dist(overheads_ms(warm_subset));
  auto hit = dist(hit_ms);
  auto cold_c = dist(cold_ms);
  row("evaluator overhead, warm evaluator", warm_over, "ms");
  row("  without the candidate's untimed calls", dist(harness_ms(warm)), "ms");
  row(fmt::format("  same {} candidates, warm", fresh.size()), warm_sub, "ms");
  row(fmt::format("  baseline: fresh process each ({})", fresh.size()), fresh_over, "ms");
  row("compile, cache hit", hit, "ms");
  row("compile, cold (baseline, in cold suite run)", cold_c, "ms");
  fmt::print("\n{:<44} {:>9.2f} s\n{:<44} {:>9.2f} s\n", "leap eval of the suite, cold (empty cache)", cold_s,
             "leap eval of the suite, warm", warm_s);
  fmt::print("\nratios: fresh-process / warm overhead (p50) = {:.1f}x; cold compile / cache hit (p50) = {:.0f}x; "
             "cold / warm suite = {:.2f}x\n",
             fresh_over.p50 / warm_sub.p50, cold_c.p50 / hit.p50, cold_s / warm_s);
  auto harness = dist(harness_ms(warm));
  fmt::print("targets: warm overhead <= 100 ms: {} (max {:.1f} ms; {:.1f} ms without the candidate's own calls); "
             "cache hit <= 10 ms: {} (max {:.2f} ms)\n",
             warm_over.max <= 100 ? "met" : "missed", warm_over.max, harness.max, hit.max <= 10 ? "met" : "missed",
             hit.max);
  std::error_code ec;
  std::filesystem::remove_all(cache, ec);
  return 0;
}

}  // namespace leap

int main(int argc, char** argv) { return leap::bench_main(argc, argv); }
