// GPU report: per CUDA candidate compile time cold and warm, evaluation time, speedup; every
// hostile candidate's status; timing stability over repeated evaluations; evaluator start
// time. Prints Markdown (docs/gpu-report.md is its output on the GPU machine).
//
//   build/leap-bench-gpu [--repeats 10]
//   build/leap-bench-gpu --compile-only     (NVRTC vs nvcc cold compiles; needs no GPU)
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/paths.h"
#include "evaluation/eval_pipeline.h"
#include "tasks/schedule.h"

namespace leap {
namespace {

std::string status_text(const EvalOutcome& o) {
  return verdict_text(o.status, o.check);
}

void candidates_table(const std::vector<EvalOutcome>& cold, const std::vector<EvalOutcome>& warm) {
  fmt::print("| candidate | status | compile cold ms | compile warm ms | eval ms (warm evaluator) | candidate us | "
             "reference us | speedup |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < warm.size(); ++i) {
    const auto& w = warm[i];
    fmt::print("| {} | {} | {:.0f} | {:.2f} | {:.0f} | {:.1f} | {:.1f} | {:.2f} |\n", w.candidate, status_text(w),
               cold[i].stages.compile_us / 1000, w.stages.compile_us / 1000, w.stages.eval_us / 1000,
               w.candidate_timing.median_us, w.reference_timing.median_us, w.speedup);
  }
}

// Cold compiles of the same sources one at a time (a candidate's latency, nothing else running)
// with the NVRTC path and with nvcc only, then all at once (the farm's throughput).
void compile_paths(const LeapConfig& base, const std::vector<CandidateSource>& sources, const std::string& dir) {
  auto farm_for = [&](bool nvrtc, const std::string& cache) {
    CompileConfig c = base.compile;
    c.nvrtc = nvrtc;
    c.cache_dir = dir + "/" + cache;
    return std::make_unique<CompileFarm>(c, make_driver(c, Backend::cuda));
  };
  auto fast = farm_for(true, "nvrtc"), slow = farm_for(false, "nvcc");
  if (!fast->nvrtc_enabled()) {
    fmt::print("NVRTC path unavailable (leap-nvrtc not built): nothing to compare\n");
    return;
  }
  fmt::print("| candidate | path | ok | NVRTC path ms | (device pass / host pass / link) | nvcc ms | nvcc / NVRTC path |\n"
             "|---|---|---|---:|---|---:|---:|\n");
  std::vector<double> fast_ms, slow_ms, ratio, dev_ms, host_ms, link_ms;
  size_t taken = 0;
  for (const auto& s : sources) {
    auto a = fast->compile({s.name, s.source, Backend::cuda});
    auto b = slow->compile({s.name, s.source, Backend::cuda});
    double fa = a.compile_us / 1000, sl = b.compile_us / 1000;
    bool nvrtc = a.compiler == "nvrtc";
    taken += nvrtc;
    if (nvrtc) {
      fast_ms.push_back(fa);
      slow_ms.push_back(sl);
      ratio.push_back(sl / fa);
      dev_ms.push_back(a.device_pass_us / 1000);
      host_ms.push_back(a.host_pass_us / 1000);
      link_ms.push_back(a.link_us / 1000);
    }
    std::string path = nvrtc ? "nvrtc" : "nvcc (" + a.nvrtc_fallback.substr(0, 60) + ")";
    std::replace(path.begin(), path.end(), '|', '/');
    fmt::print("| {} | {} | {} | {:.0f} | {:.0f} / {:.0f} / {:.0f} | {:.0f} | {:.1f}x |\n", s.name, path,
               a.ok == b.ok ? (a.ok ? "both" : "neither") : "DIFFERS", fa, a.device_pass_us / 1000,
               a.host_pass_us / 1000, a.link_us / 1000, sl, sl / fa);
  }
  auto f = bench::dist(fast_ms), n = bench::dist(slow_ms), r = bench::dist(ratio);
  fmt::print("\n{} of {} sources took the NVRTC path. Over those, one at a time: NVRTC path p50 {:.0f} ms, p90 {:.0f} ms, "
             "max {:.0f} ms; nvcc p50 {:.0f} ms, p90 {:.0f} ms; nvcc / NVRTC path p50 {:.1f}x.\n",
             taken, sources.size(), f.p50, f.p90, f.max, n.p50, n.p90, r.p50);
  fmt::print("Phases of the NVRTC path, p50: device pass (leap-nvrtc) {:.0f} ms, host pass (g++, precompiled prelude) "
             "{:.0f} ms, concurrently; then link {:.0f} ms.\n",
             bench::dist(dev_ms).p50, bench::dist(host_ms).p50, bench::dist(link_ms).p50);
  // Throughput: every source at once through a farm of one job per core, cold caches.
  auto batch = [&](bool nvrtc, const std::string& cache) {
    auto farm = farm_for(nvrtc, cache);
    auto t0 = Clock::now();
    std::vector<std::shared_future<CompileResult>> futs;
    for (const auto& s : sources) futs.push_back(farm->submit({s.name, s.source, Backend::cuda}));
    for (auto& fu : futs) fu.wait();
    return micros_since(t0) / 1e6;
  };
  double bf = batch(true, "nvrtc-batch"), bn = batch(false, "nvcc-batch");
  fmt::print("All {} at once on {} compile jobs: NVRTC path {:.2f} s, nvcc only {:.2f} s ({:.1f}x).\n", sources.size(),
             fast->jobs(), bf, bn, bn / bf);
}

// How fast the GPU machine starts candidate runners (each creates a CUDA context): `n` at once,
// spawn to ready reply, without the sandbox. Returns the wall of all n in seconds; *exit_s: from
// killing them to all reaped (their contexts torn down).
double start_runners(int n, std::vector<double>* each_ms, double* exit_s = nullptr) {
  const std::string runner = std::filesystem::path(evald_path()).parent_path() / "leap-runner";
  struct Child {
    pid_t pid;
    int fd;
    Clock::time_point t0;
  };
  std::vector<Child> kids;
  auto t_all = Clock::now();
  for (int i = 0; i < n; ++i) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return 0;
    auto t0 = Clock::now();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(sv[1], 3);  // the runner's channel
      ::execl(runner.c_str(), runner.c_str(), "--backend", "cuda", "--device", "0", "--no-seccomp", nullptr);
      ::_exit(127);
    }
    ::close(sv[1]);
    kids.push_back({pid, sv[0], t0});
  }
  for (auto& k : kids) {
    pollfd p{k.fd, POLLIN, 0};
    if (::poll(&p, 1, 60000) == 1) each_ms->push_back(micros_since(k.t0) / 1000);
  }
  double wall = micros_since(t_all) / 1e6;
  auto t_exit = Clock::now();
  for (auto& k : kids) {
    ::close(k.fd);
    ::kill(k.pid, SIGKILL);  // as the judge retires a used runner
  }
  for (auto& k : kids) ::waitpid(k.pid, nullptr, 0);
  if (exit_s) *exit_s = micros_since(t_exit) / 1e6;
  return wall;
}

void runner_start_section() {
  const char* conn = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  fmt::print("\n## Runner starts (CUDA context per candidate{})\n\n| runners started at once | start wall s | "
             "runners/s | spawn to ready p50 ms | max ms | kill to reaped s | start and exit: runners/s |\n"
             "|---:|---:|---:|---:|---:|---:|---:|\n",
             conn ? fmt::format(", CUDA_DEVICE_MAX_CONNECTIONS={}", conn) : "");
  for (int n : {1, 1, 4, 8, 16}) {
    std::vector<double> each;
    double exit_s = 0;
    double wall = start_runners(n, &each, &exit_s);
    auto d = bench::dist(each);
    fmt::print("| {} | {:.2f} | {:.1f} | {:.0f} | {:.0f} | {:.2f} | {:.1f} |\n", n, wall,
               each.size() / std::max(wall, 1e-9), d.p50, d.max, exit_s, each.size() / std::max(wall + exit_s, 1e-9));
  }
  std::vector<double> each;
  double exits = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < 8; ++i) {
    double x = 0;
    start_runners(1, &each, &x);
    exits += x;
  }
  double wall = micros_since(t0) / 1e6;
  fmt::print("| 8, one after another | {:.2f} | {:.1f} | {:.0f} | {:.0f} | {:.2f} | {:.1f} |\n", wall - exits,
             8 / (wall - exits), bench::dist(each).p50, bench::dist(each).max, exits, 8 / wall);
}

// Two judges sharing the GPU ([sandbox] gpus = 1): their untimed work overlaps, their timing
// takes turns (GpuLock). The warm suite's rate beside one judge's, and timing stability while
// the other judge works on another candidate.
template <typename Record>
void shared_gpu_section(const LeapConfig& cfg, const std::vector<Task>& tasks, const std::vector<CandidateSource>& cands,
                        const std::vector<std::string>& stable, const std::map<std::string, double>& alone_median,
                        double one_judge_s, int repeats, Record& record) {
  LeapConfig two = cfg;
  two.sandbox.evaluators = 2;
  two.sandbox.gpus = 1;
  auto log = role_logger("bench");
  EvalPipeline shared(two, Backend::cuda, evald_path(), log);
  (void)shared.run(tasks, cands);  // the judges' first sight of every task
  auto t0 = Clock::now();
  auto outs = shared.run(tasks, cands);
  double wall_s = micros_since(t0) / 1e6;
  record("two judges", outs);
  std::vector<double> lock_ms, waits, starts;
  size_t ok = 0, waited = 0;
  for (const auto& o : outs) {
    ok += o.status == Status::ok;
    lock_ms.push_back(o.stages.gpu_lock_wait_us / 1000);
    waited += o.stages.runner_wait_us > 0;
    if (o.stages.runner_start_us > 0) starts.push_back(o.stages.runner_start_us / 1000);
  }
  fmt::print("\n## Two judges sharing the GPU\n\n| judges | warm suite s | candidates/s | vs one judge | ok | GPU lock wait "
             "p50 ms | p90 ms | runner waits |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  fmt::print("| 1 | {:.1f} | {:.2f} | 1.00x | - | - | - | - |\n", one_judge_s, cands.size() / one_judge_s);
  fmt::print("| 2 | {:.1f} | {:.2f} | {:.2f}x | {}/{} | {:.1f} | {:.1f} | {} |\n", wall_s, cands.size() / wall_s,
             one_judge_s / wall_s, ok, outs.size(), bench::dist(lock_ms).p50, bench::dist(lock_ms).p90, waited);
  fmt::print("\nRunner start as the runners report it (process start to ready) p50 {:.0f} ms, max {:.0f} ms.\n",
             bench::dist(starts).p50, bench::dist(starts).max);
  fmt::print("\n| candidate (beside the other judge) | ok | median of medians us | CV of medians | vs one judge alone |\n"
             "|---|---:|---:|---:|---:|\n");
  for (const auto& name : stable) {
    auto it = std::find_if(cands.begin(), cands.end(), [&](const auto& c) { return c.name == name; });
    const auto& partner_name = name == "matmul.tuned.cu" ? stable[0] : stable.back();
    auto partner = std::find_if(cands.begin(), cands.end(), [&](const auto& c) { return c.name == partner_name; });
    if (it == cands.end() || partner == cands.end()) continue;
    std::vector<CandidateSource> run;
    for (int i = 0; i < repeats; ++i) {
      run.push_back(*it);
      run.push_back(*partner);
    }
    auto res = shared.run(tasks, run);
    record("two judges repeat " + name, res);
    std::vector<double> med;
    size_t n = 0;
    for (size_t i = 0; i < res.size(); i += 2, ++n)
      if (res[i].status == Status::ok) med.push_back(res[i].candidate_timing.median_us);
    auto d = bench::dist(med);
    auto alone = alone_median.find(name);
    fmt::print("| {} | {}/{} | {:.2f} | {:.2f}% | {} |\n", name, med.size(), n, d.p50, 100 * d.cv,
               alone == alone_median.end() || alone->second <= 0 ? "-" : fmt::format("{:.3f}x", d.p50 / alone->second));
  }
}

// The same candidate evaluated `repeats` times: the spread of its medians (the judge's timing
// stability); returns each candidate's median of medians.
template <typename Record>
std::map<std::string, double> stability_section(EvalPipeline& pipeline, const std::vector<Task>& tasks,
                                                const std::vector<CandidateSource>& cands,
                                                const std::vector<std::string>& stable, int repeats, Record& record) {
  fmt::print("\n## Timing stability ({} evaluations of the same candidate)\n\n", repeats);
  fmt::print("| candidate | ok | median of medians us | min us | max us | CV of medians | mean RSE | timed calls | eval ms p50 |\n"
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::string not_ok;
  std::map<std::string, double> alone_median;
  for (const auto& name : stable) {
    auto it = std::find_if(cands.begin(), cands.end(), [&](const auto& c) { return c.name == name; });
    if (it == cands.end()) continue;
    auto outs = pipeline.run(tasks, std::vector<CandidateSource>(static_cast<size_t>(repeats), *it));
    record("repeat " + name, outs);
    std::vector<double> med, rse, evs, n;
    std::string other;
    for (const auto& o : outs) {
      if (o.status != Status::ok) {
        other += " " + status_text(o) + ": " + o.feedback.substr(0, 160);
        continue;
      }
      med.push_back(o.candidate_timing.median_us);
      rse.push_back(o.candidate_timing.rse);
      n.push_back(o.candidate_timing.samples);
      evs.push_back(o.stages.eval_us / 1000);
    }
    auto d = bench::dist(med);
    alone_median[name] = d.p50;
    fmt::print("| {} | {}/{} | {:.2f} | {:.2f} | {:.2f} | {:.2f}% | {:.2f}% | {:.0f} | {:.0f} |\n", name, med.size(),
               outs.size(), d.p50, med.empty() ? 0.0 : *std::min_element(med.begin(), med.end()), d.max, 100 * d.cv,
               100 * bench::dist(rse).mean, bench::dist(n).mean, bench::dist(evs).p50);
    if (!other.empty()) not_ok += "\n- " + name + ":" + other;
  }
  if (!not_ok.empty()) fmt::print("\nNot ok during the stability runs:{}\n", not_ok);
  return alone_median;
}

}  // namespace

// Long: the report's sections in the order they print, sharing the warm judges and their outcomes.
int gpu_report(int argc, char** argv) {
  CLI::App app{"leap GPU report"};
  int repeats = 10;
  bool compile_only = false;
  std::string records_path;
  app.add_option("--repeats", repeats, "evaluations of the same candidate for the stability figure");
  app.add_flag("--compile-only", compile_only, "only the NVRTC vs nvcc compile comparison (no GPU needed)");
  bool starts_only = false;
  app.add_flag("--runner-starts", starts_only, "only how fast CUDA runners start, alone and several at once");
  app.add_option("--records", records_path, "write every evaluation's outcome record here (JSON lines)");
  std::string config_path;
  app.add_option("--config", config_path, "a leap config (TOML) whose [sandbox] and [eval] the judge uses");
  bool quick = false;
  bool stability_only = false;
  app.add_flag("--stability-only", stability_only, "only the timing stability of repeated evaluations");
  app.add_flag("--quick", quick,
               "only the warm suite, the hostile candidates and timing stability (no compile comparison, no "
               "second judge, no runner-start or evaluator-start figures)");
  CLI11_PARSE(app, argc, argv);
  if (starts_only) {
    runner_start_section();
    return 0;
  }
  auto log = role_logger("bench");
  log->set_level(spdlog::level::warn);
  std::string cache = std::filesystem::temp_directory_path() / ("leap-gpu-" + std::to_string(::getpid()));
  LeapConfig cfg = config_path.empty() ? LeapConfig{} : load_config(config_path);
  cfg.compile.cache_dir = cache;
  fmt::print("Judge settings: {} runner spares (0: the default), cuda_connections {} (0: the driver's default){}.\n\n",
             cfg.sandbox.runner_spares, cfg.sandbox.cuda_connections, config_path.empty() ? "" : ", from " + config_path);
  auto tasks = load_suite("builtin");
  auto cands = load_candidates(data_dir() + "/examples/cuda", Backend::cuda);
  auto hostile = load_candidates(data_dir() + "/tests/fixtures/hostile/cuda", Backend::cuda);
  // Fast examples and the slowest correct ones (GEMMs at 50x the reference: few timed calls).
  const std::vector<std::string> stable = {"relu.cu", "softmax.cu", "layer_norm.cu", "matmul.tuned.cu", "mlp_block.cu"};
  if (!quick && !stability_only) {
    std::vector<CandidateSource> all = cands;
    all.insert(all.end(), hostile.begin(), hostile.end());
    for (const auto& t : tasks)  // one schedule-template render per templated task
      if (has_schedule(t.name)) {
        CandidateSource c;
        c.name = t.name + ".template.cu";
        c.task = t.name;
        c.source = render_schedule(t, Backend::cuda, Choice(schedule_knobs().size(), 1));
        all.push_back(c);
      }
    fmt::print("## Cold compile: NVRTC path vs nvcc ({} sources)\n\n", all.size());
    compile_paths(cfg, all, cache + "-paths");
    std::error_code ec;
    std::filesystem::remove_all(cache + "-paths", ec);
    if (compile_only) return 0;
    fmt::print("\n");
  }

  EvalPipeline pipeline(cfg, Backend::cuda, evald_path(), log);
  std::ofstream records;
  if (!records_path.empty()) records.open(records_path);
  auto record = [&](const std::string& phase, const std::vector<EvalOutcome>& outs) {
    if (!records) return;
    for (const auto& o : outs) {
      auto j = to_json(o);
      j["phase"] = phase;
      records << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
  };
  if (stability_only) {
    (void)stability_section(pipeline, tasks, cands, stable, repeats, record);
    std::error_code ec;
    std::filesystem::remove_all(cache, ec);
    return 0;
  }
  auto t0 = Clock::now();
  auto cold = pipeline.run(tasks, cands);
  double cold_s = micros_since(t0) / 1e6;
  t0 = Clock::now();
  auto warm = pipeline.run(tasks, cands);
  double warm_s = micros_since(t0) / 1e6;
  record("cold", cold);
  record("warm", warm);

  fmt::print("## CUDA candidates ({} examples and tuned kernels)\n\n", cands.size());
  candidates_table(cold, warm);
  std::map<std::string, int> level;
  for (const auto& t : tasks) level[t.name] = t.level;
  std::vector<double> nvcc_ms, hit_ms, eval_ms;
  size_t ok = 0;
  for (size_t i = 0; i < warm.size(); ++i) {
    nvcc_ms.push_back(cold[i].stages.compile_us / 1000);
    hit_ms.push_back(warm[i].stages.compile_us / 1000);
    if (level[warm[i].task] == 1 && warm[i].status == Status::ok) eval_ms.push_back(warm[i].stages.eval_us / 1000);
    ok += warm[i].status == Status::ok;
  }
  auto nv = bench::dist(nvcc_ms), hit = bench::dist(hit_ms), ev = bench::dist(eval_ms);
  fmt::print("\n{} of {} ok. Cold compile (all at once, NVRTC path where taken) p50 {:.0f} ms, p90 {:.0f} ms, max {:.0f} ms; cache hit p50 {:.3f} ms "
             "(cold/hit {:.0f}x). Evaluation of level-1 candidates with a warm evaluator p50 {:.0f} ms, p90 {:.0f} ms. Suite wall: cold "
             "{:.1f} s, warm {:.1f} s.\n",
             ok, warm.size(), nv.p50, nv.p90, nv.max, hit.p50, nv.p50 / std::max(hit.p50, 1e-3), ev.p50, ev.p90,
             cold_s, warm_s);

  // The judge: runner starts hidden by spares, and how far the judge's clock is from the runner's.
  std::vector<double> waits, excess;
  size_t waited = 0;
  for (const auto& o : warm) {
    waits.push_back(o.stages.runner_wait_us / 1000);
    waited += o.stages.runner_wait_us > 0;
    if (o.status == Status::ok) excess.push_back(o.wall_excess_us);
  }
  auto wd = bench::dist(waits), xd = bench::dist(excess);
  // Where a level-1 evaluation's time goes (p50 over the correct ones), for the judge's budget.
  std::vector<double> st_load, st_map, st_lib, st_check, st_timing, st_kept, st_rest, st_calls;
  for (const auto& o : warm) {
    if (level[o.task] != 1 || o.status != Status::ok) continue;
    const auto& s = o.stages;
    st_load.push_back(s.load_us / 1000);
    st_map.push_back(s.runner_map_us / 1000);
    st_lib.push_back(s.runner_library_us / 1000);
    st_check.push_back(s.correctness_us / 1000);
    st_timing.push_back(s.timing_us / 1000);
    st_kept.push_back(s.kept_verify_us / 1000);
    st_rest.push_back((s.eval_us - s.load_us - s.correctness_us - s.timing_us - s.kept_verify_us) / 1000);
    st_calls.push_back(o.calls);
  }
  fmt::print("\nLevel-1 evaluation stages, p50: load {:.1f} ms (in the runner: buffers mapped and filter installed "
             "{:.1f} ms, candidate dlopen {:.1f} ms), correctness trials {:.1f} ms, warm-up and timed calls {:.1f} ms, "
             "kept calls verified {:.1f} ms, everything else (reference check, runner hand-off, calibration, worker "
             "round trip) {:.1f} ms; {:.0f} candidate calls.\n",
             bench::dist(st_load).p50, bench::dist(st_map).p50, bench::dist(st_lib).p50, bench::dist(st_check).p50,
             bench::dist(st_timing).p50, bench::dist(st_kept).p50, bench::dist(st_rest).p50, bench::dist(st_calls).p50);
  std::vector<double> starts;
  for (const auto& o : warm)
    if (o.stages.runner_start_us > 0) starts.push_back(o.stages.runner_start_us / 1000);
  fmt::print("\nRunner start as the runners report it (process start to ready): p50 {:.0f} ms, max {:.0f} ms.\n",
             bench::dist(starts).p50, bench::dist(starts).max);
  fmt::print("\nRunner starts: {} of {} evaluations waited for one (wait p50 {:.1f} ms, max {:.1f} ms). Judge wall minus "
             "runner events minus calibrated overhead over correct candidates (lowest decile per candidate): p50 {:.1f} us, "
             "max {:.1f} us.\n",
             waited, warm.size(), wd.p50, wd.max, xd.p50, xd.max);

  fmt::print("\n## Hostile CUDA candidates\n\n| candidate | expected | status | eval ms | candidate us | judge wall "
             "excess us | feedback |\n|---|---|---|---:|---:|---:|---|\n");
  pipeline.evaluate_in_order(true);  // what an attack leaves behind meets the next one, as in the tests
  auto hout = pipeline.run(tasks, hostile);
  record("hostile", hout);
  for (size_t i = 0; i < hout.size(); ++i) {
    std::string first = hostile[i].source.substr(0, hostile[i].source.find('\n'));
    std::string fb = hout[i].feedback.substr(0, 110);
    std::replace(fb.begin(), fb.end(), '\n', ' ');
    std::replace(fb.begin(), fb.end(), '|', '/');
    fmt::print("| {} | {} | {} | {:.0f} | {:.1f} | {:.1f} | {} |\n", hostile[i].name, first.substr(first.find(':') + 2),
               status_text(hout[i]), hout[i].stages.eval_us / 1000, hout[i].candidate_timing.median_us,
               hout[i].wall_excess_us, fb);
  }
  fmt::print("\nEvaluator restarts during the hostile run: {}\n", pipeline.evaluator_restarts());

  auto alone_median = stability_section(pipeline, tasks, cands, stable, repeats, record);
  std::error_code ec;
  if (quick) {
    std::filesystem::remove_all(cache, ec);
    return 0;
  }
  shared_gpu_section(cfg, tasks, cands, stable, alone_median, warm_s, repeats, record);
  runner_start_section();

  // Evaluator start: a fresh process to its first answer, minus a warm evaluation.
  std::map<std::string, const Task*> by_name;
  for (const auto& t : tasks) by_name[t.name] = &t;
  auto relu = std::find_if(warm.begin(), warm.end(), [](const auto& o) { return o.candidate == "relu.cu"; });
  if (relu != warm.end()) {
    CompileFarm farm(cfg.compile, make_driver(cfg.compile, Backend::cuda));
    auto src = std::find_if(cands.begin(), cands.end(), [](const auto& c) { return c.name == "relu.cu"; });
    auto lib = farm.compile({src->name, src->source, Backend::cuda}).library_path;
    auto sandbox = cfg.sandbox;
    sandbox.spares = 0;
    std::vector<double> start_ms;
    for (int i = 0; i < 3; ++i) {
      auto s = Clock::now();
      EvaluatorSlot slot(evald_path(), Backend::cuda, sandbox, cfg.eval, log, 0);
      EvalJob job{0, by_name.at("relu"), "relu.cu", lib, &relu->reference_timing};
      auto first = slot.evaluate(job);
      double first_ms = micros_since(s) / 1000;
      auto second = slot.evaluate(job);
      start_ms.push_back(first_ms - second.stages.eval_us / 1000);
    }
    auto d = bench::dist(start_ms);
    fmt::print("\nEvaluator start (process start to ready, CUDA context and LibTorch initialised): p50 {:.0f} ms, "
               "max {:.0f} ms over 3 starts. With the pre-started spare, a crash costs the next candidate none of it.\n",
               d.p50, d.max);
  }
  std::filesystem::remove_all(cache, ec);
  return 0;
}

}  // namespace leap

int main(int argc, char** argv) { return leap::gpu_report(argc, argv); }
