// leap bench: the in-process benchmarks (dcp, compile-hiding; bench/) and the Python ones
// (serve, memory, lm: bench/*_bench.py, run with the system's Python).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "apps/commands.h"
#include "bench/bench.h"
#include "common/error.h"
#include "common/paths.h"

namespace leap {
namespace {

// The client side is Python, like the trainers that call the service and the model servers.
[[noreturn]] void exec_python_bench(const CLI::App& sub) {
  std::vector<std::string> args{"/usr/bin/python3", data_dir() + "/bench/" + sub.get_name() + "_bench.py", "--build",
                                std::filesystem::path(evald_path()).parent_path().string()};
  for (const auto& r : sub.remaining()) args.push_back(r);
  std::vector<char*> argv_c;
  for (auto& s : args) argv_c.push_back(s.data());
  argv_c.push_back(nullptr);
  ::execv(argv_c[0], argv_c.data());
  throw LeapError(std::string("leap bench ") + sub.get_name() + ": cannot run /usr/bin/python3: " + std::strerror(errno));
}

}  // namespace

void add_bench_command(CLI::App& app, Commands& c) {
  auto* bench = app.add_subcommand("bench", "benchmarks that users run");
  bench->require_subcommand(1);
  auto bd = std::make_shared<BenchDcpArgs>();
  auto* dcp = bench->add_subcommand(
      "dcp",
      "LEAP's grid: DCP ranges, rewards and baselines vs single-turn, with the config's policy (schedule, or a "
      "language model: [policy] kind = \"lm\", e.g. configs/dcp-lm.toml after bench/dcp-lm.sh's SFT): held-out "
      "accuracy at turns 1..T, evaluations and time to turn-1 and turn-T targets, over seeds");
  dcp->footer(
      "Rows (--variants): leap (>=50% failing refined, all-failed pruned, rank reward), leap-all-failed (all-failed "
      "refined too), lt50, full (unpruned), grpo (binary, group mean and std), trloo, leap-turn (advantage_baseline = "
      "turn), single-turn; kevin on request.");
  dcp->add_option("--config", bd->config, "TOML config (default: configs/demo.toml; the LM grid: configs/dcp-lm.toml)");
  dcp->add_option("--steps", bd->steps, "steps per variant (default: [run] steps)");
  dcp->add_option("--workers", bd->workers, "workers (threads, each with its evaluator)")->capture_default_str();
  dcp->add_option("--seeds", bd->seeds, "repetitions of every variant (default: [bench] seeds)");
  dcp->add_option("--target", bd->target, "held-out accuracy at turn T to reach (default: [bench] target)");
  dcp->add_option("--target-turn1", bd->target_turn1, "held-out accuracy at turn 1 to reach (default: [bench] target_turn1)");
  dcp->add_option("--eval-every", bd->eval_every, "steps between held-out evaluations (default: [bench] eval_every)");
  dcp->add_option("--held-out", bd->held_out, "tasks kept out of training (default: [bench] held_out)");
  dcp->add_option("--variants", bd->variants,
                  "variants to run (default: leap leap-all-failed lt50 full grpo trloo leap-turn single-turn)")
      ->delimiter(',');
  dcp->add_option("--out", bd->out, "folder for the variants' run directories")->capture_default_str();
  dcp->add_option("--jobs", bd->jobs, "runs at once, each a process of its own with its --workers on cores of its own "
                                     "(an equal share of the usable cores; the runs' wall-clock is then each share's)")
      ->capture_default_str();
  dcp->add_flag("--summarize", bd->summarize, "run nothing: print the table and write the report of the runs already in --out "
                                            "(same config and options)");
  dcp->add_option("--run-one", bd->run_one, "VARIANT:SEED: train and evaluate that run only (what --jobs starts)")->group("");
  dcp->add_option("--cores", bd->cores, "with --run-one: the CPUs it keeps to")->delimiter(',')->group("");
  auto bh = std::make_shared<BenchCompileHidingArgs>();
  auto* hiding = bench->add_subcommand("compile-hiding",
                                       "serial vs farm-then-evaluate vs pipelined (cold, warm) vs load_inline builds");
  hiding->add_option("--config", bh->config, "TOML config (default: configs/demo.toml, configs/demo-cuda.toml)");
  hiding->add_option("--backend", bh->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  hiding->add_option("--count", bh->count, "distinct candidates")->capture_default_str();
  hiding->add_option("--baseline", bh->baseline, "candidates built the KernelBench way (load_inline); 0 = none")
      ->capture_default_str();
  hiding->add_option("--python", bh->python, "Python with torch for the baseline")->capture_default_str();
  hiding->add_option("--modes", bh->modes, "modes to run (pipelined includes pipelined-warm)")
      ->check(CLI::IsMember({"serial", "farm-then-eval", "pipelined"}))
      ->delimiter(',')
      ->capture_default_str();
  hiding->add_option("--records", bh->records, "FILE.jsonl: every mode's outcomes, each record with its \"mode\"");

  auto* serve_bench = bench->add_subcommand(
      "serve", "leap serve's requests/s and latency beside a KernelBench-style service (bench/serve_bench.py --help)");
  serve_bench->allow_extras();
  serve_bench->prefix_command();
  serve_bench->set_help_flag();  // --help is the script's own: it lists the options
  auto* memory_bench = bench->add_subcommand(
      "memory", "tokens leap agent sends with no, passive and active context (bench/memory_bench.py --help)");
  memory_bench->allow_extras();
  memory_bench->prefix_command();
  memory_bench->set_help_flag();  // --help is the script's own: it lists the options
  auto* lm_bench_py = bench->add_subcommand(
      "lm", "leap's LM engine beside transformers' generate: tokens/s, memory, training step (bench/lm_bench.py --help)");
  lm_bench_py->allow_extras();
  lm_bench_py->prefix_command();
  lm_bench_py->set_help_flag();  // --help is the script's own: it lists the options
  c.add(dcp, [bd] { return run_bench_dcp(*bd); });
  c.add(hiding, [bh] { return run_bench_compile_hiding(*bh); });
  for (auto* sub : {serve_bench, memory_bench, lm_bench_py})
    c.add(sub, [sub]() -> int { exec_python_bench(*sub); });
}

}  // namespace leap
