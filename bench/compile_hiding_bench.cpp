// `leap bench compile-hiding`: how well the compile farm hides compile latency behind
// evaluation. N distinct schedule-policy candidates over the built-in suite go through four
// modes, each on a cold cache of its own (warm: the pipelined mode's cache again):
//   serial          compile one, evaluate it, next;
//   farm-then-eval  every compile in parallel first, then every evaluation;
//   pipelined       leap's default: compiles in parallel, evaluations as soon as each is built;
//   pipelined-warm  pipelined with every compile a cache hit.
// Baseline: bench/baselines/kernelbench_load_inline.py builds a few of the same candidates the
// KernelBench way (torch.utils.cpp_extension.load_inline, one build each).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/cores.h"
#include "common/error.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "evaluation/eval_pipeline.h"
#include "tasks/schedule.h"

namespace leap {
namespace fs = std::filesystem;
namespace {

// Distinct sources: tasks in turn, each with a fresh knob choice drawn without replacement.
std::vector<CandidateSource> sample_candidates(const std::vector<Task>& tasks, Backend backend, int n, uint64_t seed) {
  std::vector<const Task*> templated;
  for (const auto& t : tasks)
    if (has_schedule(t.name) && t.supports(backend)) templated.push_back(&t);
  if (templated.empty()) throw LeapError("no schedule templates for this backend");
  const auto& knobs = schedule_knobs();
  size_t combos = 1;
  for (const auto& k : knobs) combos *= k.values.size();
  std::vector<std::vector<size_t>> order(templated.size());
  std::mt19937_64 rng(seed);
  for (auto& o : order) {
    for (size_t i = 0; i < combos; ++i) o.push_back(i);
    std::shuffle(o.begin(), o.end(), rng);
  }
  if (static_cast<size_t>(n) > combos * templated.size())
    throw LeapError(fmt::format("--count {} is more than the {} distinct choices", n, combos * templated.size()));
  std::vector<CandidateSource> out;
  std::set<std::string> seen;
  for (size_t i = 0; out.size() < static_cast<size_t>(n); ++i) {
    size_t t = i % templated.size(), k = order[t][i / templated.size()];
    Choice c;
    for (const auto& knob : knobs) {
      c.push_back(static_cast<int>(k % knob.values.size()));
      k /= knob.values.size();
    }
    std::string src = render_schedule(*templated[t], backend, c);
    if (!seen.insert(src).second) continue;
    out.push_back({templated[t]->name, fmt::format("{}.{}", templated[t]->name, describe(c)), src, "schedule"});
    std::replace(out.back().name.begin(), out.back().name.end(), ' ', '.');
  }
  return out;
}

struct ModeResult {
  std::string name;
  double wall_s = 0, cands_per_s = 0, p50_s = 0, p95_s = 0, busy = 0, hit_rate = 0, efficiency = 0, ideal_s = 0;
  double judge_start_s = 0;  // before the mode's clock: its pipeline's construction to its judges' hello
  std::vector<EvalOutcome> outcomes;                  // per candidate, in submission order
  std::map<std::string, std::pair<size_t, double>> by_status;  // status -> candidates, evaluation s
};

// latencies: per candidate, seconds from its submission to its outcome.
ModeResult summarise(const std::string& name, const std::vector<EvalOutcome>& outs, const std::vector<double>& latencies,
                     double wall_s, size_t hits, double compile_cpu_s, int evaluators, int cores) {
  ModeResult m;
  m.name = name;
  m.wall_s = wall_s;
  m.cands_per_s = static_cast<double>(outs.size()) / wall_s;
  m.p50_s = bench::quantile(latencies, 0.5);
  m.p95_s = bench::quantile(latencies, 0.95);
  double eval_s = 0;
  for (const auto& o : outs) {
    eval_s += o.stages.eval_us / 1e6;
    m.outcomes.push_back(o);
    auto& [n, s] = m.by_status[to_string(o.status)];
    ++n;
    s += o.stages.eval_us / 1e6;
  }
  m.busy = eval_s / (wall_s * evaluators);
  m.hit_rate = static_cast<double>(hits) / static_cast<double>(outs.size());
  m.ideal_s = std::max(compile_cpu_s / cores, eval_s / evaluators);
  m.efficiency = m.ideal_s / wall_s;
  return m;
}

class Progress {
 public:
  Progress(std::string what, size_t total) : what_(std::move(what)), total_(total), t0_(Clock::now()) {}
  void tick() {
    ++done_;
    if (!isatty(STDERR_FILENO)) return;
    double s = micros_since(t0_) / 1e6, rate = static_cast<double>(done_) / std::max(s, 1e-9);
    std::cerr << fmt::format("\r  {}: {}/{} candidates, {:.1f}/s, ETA {:.0f} s   ", what_, done_, total_, rate,
                             static_cast<double>(total_ - done_) / std::max(rate, 1e-9))
              << std::flush;
  }
  ~Progress() {
    if (isatty(STDERR_FILENO)) std::cerr << "\r" << std::string(72, ' ') << "\r";
    std::cerr << fmt::format("  {}: {} candidates in {:.1f} s\n", what_, total_, micros_since(t0_) / 1e6);
  }

 private:
  std::string what_;
  size_t total_, done_ = 0;
  Clock::time_point t0_;
};

struct Baseline {
  bool ran = false;
  std::string note;
  std::vector<double> build_s;
  size_t ok = 0;
};

Baseline run_baseline(const BenchCompileHidingArgs& a, Backend backend, const std::vector<CandidateSource>& cands,
                      const std::string& dir) {
  Baseline b;
  if (a.baseline <= 0) {
    b.note = "skipped (--baseline 0)";
    return b;
  }
  std::vector<std::string> cmd{a.python, data_dir() + "/bench/baselines/kernelbench_load_inline.py", "--backend",
                               to_string(backend), "--include", abi_include_dir()};
  // DLPack alone: a bundled prefix also holds headers (fmt) that would shadow LibTorch's own.
  if (std::string(LEAP_DLPACK_INCLUDE_DIR) != "/usr/include") {
    fs::create_directories(dir + "/include/dlpack");
    fs::copy_file(std::string(LEAP_DLPACK_INCLUDE_DIR) + "/dlpack/dlpack.h", dir + "/include/dlpack/dlpack.h",
                  fs::copy_options::overwrite_existing);
    cmd.insert(cmd.end(), {"--include", dir + "/include"});
  }
  for (int i = 0; i < a.baseline && i < static_cast<int>(cands.size()); ++i) {
    // Candidates that compile in leap, so the baseline times builds rather than errors.
    std::string path = dir + "/" + cands[static_cast<size_t>(i)].name + (backend == Backend::cuda ? ".cu" : ".cpp");
    std::ofstream(path) << cands[static_cast<size_t>(i)].source;
    cmd.push_back(path);
  }
  std::cerr << fmt::format("  kernelbench-load-inline: building {} candidates with load_inline...\n",
                           std::min<size_t>(static_cast<size_t>(a.baseline), cands.size()));
  auto res = run_command(cmd, 3600.0 * a.baseline);
  std::istringstream in(res.output);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j.contains("build_s")) {
      b.build_s.push_back(j["build_s"].get<double>());
      b.ok += j.value("ok", false);
      if (!j.value("ok", false) && b.note.empty()) b.note = j.value("error", "");
    } else if (j.contains("error")) {
      b.note = j["error"].get<std::string>();
    }
  }
  b.ran = !b.build_s.empty();
  if (!b.ran && b.note.empty()) b.note = "no result: " + res.output.substr(0, 200);
  return b;
}

}  // namespace

// Long: the modes run in one order over the same candidates and caches; each block is one row of the table.
int run_bench_compile_hiding(const BenchCompileHidingArgs& a) {
  auto parsed = backend_from(a.backend);
  if (!parsed) throw LeapError("--backend must be cpu or cuda, not '" + a.backend + "'");
  Backend backend = *parsed;
  std::string path = !a.config.empty() ? a.config
                     : data_dir() + (backend == Backend::cuda ? "/configs/demo-cuda.toml" : "/configs/demo.toml");
  LeapConfig cfg = load_config(path);
  if (a.count < 1) throw LeapError("--count must be >= 1");
  auto log = role_logger("bench");
  log->set_level(spdlog::level::warn);
  auto tasks = load_suite(cfg.run.suite.empty() ? "builtin" : cfg.run.suite);
  auto cands = sample_candidates(tasks, backend, a.count, cfg.run.seed);
  const int cores = cfg.compile.jobs > 0 ? cfg.compile.jobs : static_cast<int>(usable_cores().size());
  const int evaluators = std::max(1, cfg.sandbox.evaluators);
  std::string root = fs::temp_directory_path() / fmt::format("leap-bench-hiding-{}", ::getpid());
  fs::create_directories(root);
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{root};
  std::cerr << fmt::format("bench compile-hiding: {} candidates ({} backend, config {}), {} compile jobs, {} evaluator(s)\n",
                           cands.size(), to_string(backend), path, cores, evaluators);
  auto config_for = [&](const std::string& cache) {  // each mode on a compile cache of its own
    LeapConfig c = cfg;
    c.compile.cache_dir = root + "/" + cache;
    return c;
  };
  // Each mode's clock starts with its judges up, as a worker's are from its second step on; what
  // their start took is reported beside the mode (a constant per job, not compile latency).
  double judge_start_s = 0;
  auto pipeline_for = [&](const std::string& cache) {
    const auto t = Clock::now();
    auto p = std::make_unique<EvalPipeline>(config_for(cache), backend, evald_path(), log);
    p->await_evaluators();
    judge_start_s = micros_since(t) / 1e6;
    return p;
  };
  std::vector<ModeResult> modes;
  auto hits_and_cpu = [](const std::vector<EvalOutcome>& outs) {
    std::pair<size_t, double> r{0, 0};
    for (const auto& o : outs) {
      if (o.cache_hit) ++r.first;
      else r.second += o.stages.compile_us / 1e6;
    }
    return r;
  };

  auto wanted = [&](const char* mode) { return std::find(a.modes.begin(), a.modes.end(), mode) != a.modes.end(); };
  if (wanted("serial")) {  // one candidate at a time, compile then evaluate
    auto p = pipeline_for("serial");
    std::vector<EvalOutcome> outs;
    std::vector<double> lat;
    Progress prog("serial", cands.size());
    auto t0 = Clock::now();
    for (const auto& c : cands) {
      auto t = Clock::now();
      outs.push_back(p->run(tasks, {c}).at(0));
      lat.push_back(micros_since(t) / 1e6);
      prog.tick();
    }
    auto [hits, cpu] = hits_and_cpu(outs);
    modes.push_back(summarise("serial", outs, lat, micros_since(t0) / 1e6, hits, cpu, evaluators, cores));
    modes.back().judge_start_s = judge_start_s;
  }
  if (wanted("farm-then-eval")) {  // all compiles first (the farm's own cache), then all evaluations
    LeapConfig c = config_for("farm-then-eval");
    auto p = pipeline_for("farm-then-eval");
    CompileFarm farm(c.compile, make_driver(c.compile, backend));
    std::vector<double> lat;
    Progress prog("farm-then-eval", cands.size());
    auto t0 = Clock::now();
    const double start_s = unix_seconds();
    std::vector<std::shared_future<CompileResult>> futs;
    for (const auto& cand : cands) futs.push_back(farm.submit({cand.name, cand.source, backend}));
    size_t hits = 0;
    double cpu = 0;
    for (auto& f : futs) {
      hits += f.get().cache_hit;
      if (!f.get().cache_hit) cpu += f.get().compile_us / 1e6;
    }
    auto outs = p->run(tasks, cands, [&](const EvalOutcome&) {
      lat.push_back(unix_seconds() - start_s);
      prog.tick();
    });
    double wall = micros_since(t0) / 1e6;
    modes.push_back(summarise("farm-then-eval", outs, lat, wall, hits, cpu, evaluators, cores));
    modes.back().judge_start_s = judge_start_s;
  }
  if (wanted("pipelined")) {  // leap's default, cold and then warm on one cache
    std::unique_ptr<EvalPipeline> pipelined = pipeline_for("pipelined");
    for (const char* name : {"pipelined", "pipelined-warm"}) {
      std::vector<double> lat;
      Progress prog(name, cands.size());
      auto t0 = Clock::now();
      auto outs = pipelined->run(tasks, cands, [&](const EvalOutcome&) {
        lat.push_back(micros_since(t0) / 1e6);
        prog.tick();
      });
      double wall = micros_since(t0) / 1e6;
      auto [hits, cpu] = hits_and_cpu(outs);
      modes.push_back(summarise(name, outs, lat, wall, hits, cpu, evaluators, cores));
      modes.back().judge_start_s = std::exchange(judge_start_s, 0.0);  // the warm mode: the same judge
    }
  }
  // What the baseline builds: the candidates that compiled, in the pipelined mode if it ran.
  auto compiled = std::find_if(modes.begin(), modes.end(), [](const ModeResult& m) { return m.name == "pipelined"; });
  if (compiled == modes.end()) compiled = modes.begin();
  std::vector<CandidateSource> built;
  for (size_t i = 0; compiled != modes.end() && i < cands.size(); ++i)
    if (compiled->outcomes.at(i).status != Status::compile_error) built.push_back(cands[i]);
  Baseline base = run_baseline(a, backend, built, root);

  std::set<std::string> task_names;
  for (const auto& c : cands) task_names.insert(c.task);
  std::cout << fmt::format("\nCompile-latency hiding: {} distinct schedule-policy candidates over {} tasks, {} backend, "
                           "{} compile jobs, {} evaluator(s)\n\n",
                           cands.size(), task_names.size(), to_string(backend), cores, evaluators);
  std::cout << "| mode | wall s | candidates/s | judge start s | /s with judge start | p50 latency s | p95 latency s | "
               "evaluator busy | cache hits | efficiency | vs serial | vs load_inline |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  const double serial_rate = !modes.empty() && modes[0].name == "serial" ? modes[0].cands_per_s : 0;
  auto vs_serial = [&](double rate) { return serial_rate > 0 ? fmt::format("{:.2f}x", rate / serial_rate) : "-"; };
  const double base_rate = base.ran ? static_cast<double>(base.build_s.size()) /
                                          std::accumulate(base.build_s.begin(), base.build_s.end(), 0.0)
                                    : 0;
  for (const auto& m : modes)
    std::cout << fmt::format("| {} | {:.1f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.0f}% | {:.0f}% | {:.2f} | {} | {} |\n",
                             m.name, m.wall_s, m.cands_per_s, m.judge_start_s,
                             static_cast<double>(m.outcomes.size()) / (m.wall_s + m.judge_start_s), m.p50_s, m.p95_s,
                             100 * m.busy, 100 * m.hit_rate,
                             m.efficiency, vs_serial(m.cands_per_s),
                             base.ran ? fmt::format("{:.0f}x", m.cands_per_s / base_rate) : "-");
  if (base.ran)
    std::cout << fmt::format("| kernelbench-load-inline (build only, {} of {} built{}) | {:.1f} | {:.3f} | - | - | {:.1f} | {:.1f} | - "
                             "| 0% | - | {} | 1x |\n",
                             base.ok, base.build_s.size(), base.note.empty() ? "" : ": " + base.note.substr(0, 80),
                             std::accumulate(base.build_s.begin(), base.build_s.end(), 0.0), base_rate,
                             bench::quantile(base.build_s, 0.5), bench::quantile(base.build_s, 0.95),
                             vs_serial(base_rate));
  size_t ok_everywhere = 0;  // the same candidate ok in every mode (a verdict that moves with load shows here)
  for (size_t i = 0; i < cands.size(); ++i)
    ok_everywhere += std::all_of(modes.begin(), modes.end(), [&](const ModeResult& m) {
      return i < m.outcomes.size() && m.outcomes[i].status == Status::ok;
    });
  std::cout << fmt::format("\nstatuses: {} of {} ok in every mode ({}). Efficiency = ideal / wall, ideal = max(compile "
                           "CPU-s / {} cores, evaluation s / {} evaluator(s)). Latency: submission to outcome. Wall: from the mode's judges "
                           "up (judge start s: the pipeline's construction to its judges' hello; the warm mode keeps "
                           "the pipelined mode's). ",
                           ok_everywhere, cands.size(), [&] {
                             std::string s;
                             for (const auto& m : modes)
                               s += fmt::format("{} {}, ", m.name,
                                                std::count_if(m.outcomes.begin(), m.outcomes.end(),
                                                              [](const EvalOutcome& o) { return o.status == Status::ok; }));
                             return s.substr(0, s.size() - 2);
                           }(), cores, evaluators);
  std::cout << (base.ran ? fmt::format("load_inline built {} candidate(s), p50 {:.1f} s each (build only; its evaluation "
                                       "would come on top).\n",
                                       base.build_s.size(), bench::quantile(base.build_s, 0.5))
                         : "KernelBench-style baseline: " + base.note + "\n");
  // A verdict that moves with the mode is load or order reaching a verdict: each such candidate,
  // with every mode's status and the first different one's feedback.
  std::vector<size_t> moved;
  for (size_t i = 0; i < cands.size(); ++i)
    if (std::any_of(modes.begin(), modes.end(), [&](const ModeResult& m) {
          return i < m.outcomes.size() && m.outcomes[i].status != modes.front().outcomes.at(i).status;
        }))
      moved.push_back(i);
  if (!moved.empty()) {
    std::cout << fmt::format("\nVerdicts that differ between modes ({} candidate(s)):\n\n| candidate |", moved.size());
    for (const auto& m : modes) std::cout << " " << m.name << " |";
    std::cout << " feedback where it differs from " << modes.front().name << " |\n|---|";
    for (size_t k = 0; k <= modes.size(); ++k) std::cout << "---|";
    std::cout << "\n";
    for (size_t i : moved) {
      std::cout << "| " << cands[i].name << " |";
      std::string why;
      for (const auto& m : modes) {
        const auto& o = m.outcomes.at(i);
        std::cout << " " << to_string(o.status) << " |";
        if (why.empty() && o.status != modes.front().outcomes[i].status) why = m.name + ": " + o.feedback;
      }
      std::replace(why.begin(), why.end(), '\n', ' ');
      std::replace(why.begin(), why.end(), '|', '/');
      std::cout << " " << why.substr(0, 240) << " |\n";
    }
  }
  if (!a.records.empty()) {
    std::ofstream out(a.records);
    for (const auto& m : modes)
      for (const auto& o : m.outcomes) {
        auto j = to_json(o);
        j["mode"] = m.name;
        out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      }
    if (!out) throw LeapError("cannot write the records to " + a.records);
    std::cerr << fmt::format("bench compile-hiding: {} records in {}\n", cands.size() * modes.size(), a.records);
  }
  // Where the evaluator's time goes: candidates and evaluation seconds by status, per mode.
  std::set<std::string> seen;
  for (const auto& m : modes)
    for (const auto& [st, _] : m.by_status) seen.insert(st);
  std::cout << "\nEvaluation by status (candidates / evaluation s):\n\n| mode |";
  for (const auto& st : seen) std::cout << " " << st << " |";
  std::cout << "\n|---|" << [&] {
    std::string r;
    for (size_t i = 0; i < seen.size(); ++i) r += "---:|";
    return r;
  }() << "\n";
  for (const auto& m : modes) {
    std::cout << "| " << m.name << " |";
    for (const auto& st : seen) {
      auto it = m.by_status.find(st);
      std::cout << (it == m.by_status.end() ? std::string(" - |")
                                            : fmt::format(" {} / {:.1f} |", it->second.first, it->second.second));
    }
    std::cout << "\n";
  }
  return 0;
}

}  // namespace leap
