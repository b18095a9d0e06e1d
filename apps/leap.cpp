// leap: the command-line entry point. Wires configuration into the roles; owns no logic.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <filesystem>
#include <csignal>
#include <iostream>

#include "apps/commands.h"
#ifdef LEAP_HAVE_SERVE
#include "agent/agent.h"
#endif
#include "common/backend.h"
#include "common/error.h"
#include "common/paths.h"

namespace {

// A usage error's message: an unknown (sub)command names itself and lists the commands there;
// anything else is CLI11's own message.
std::string usage_error(const CLI::App& app, int argc, char** argv, const CLI::ParseError& e) {
  const CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.empty() || arg[0] == '-') break;
    const CLI::App* next = nullptr;
    for (const auto* sub : at->get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == arg) next = sub;
    if (!next) {
      if (at->get_require_subcommand_min() == 0) break;
      std::string names;
      for (const auto* sub : at->get_subcommands([](const CLI::App*) { return true; }))
        names += (names.empty() ? "" : ", ") + sub->get_name();
      const std::string where = at == &app ? "leap" : "leap ... " + at->get_name();
      return "unknown command '" + arg + "' for " + where + "; the commands are: " + names;
    }
    at = next;
  }
  return e.what();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"leap: distributed rollout and evaluation of GPU-kernel-writing policies"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("leap ") + LEAP_VERSION + " (commit " + LEAP_COMMIT + ")");

  leap::EvalArgs ea;
  auto* eval = app.add_subcommand("eval", "compile and evaluate candidates against a task suite");
  eval->add_option("--tasks", ea.tasks, "suite folder, task folder, 'builtin' or a bundled variant ('refine', 'layouts')")->capture_default_str();
  eval->add_option("--candidates", ea.candidates, "folder of candidate sources or FILE.jsonl (default: bundled examples)");
  eval->add_option("--backend", ea.backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  eval->add_option("--config", ea.config, "TOML config ([compile], [sandbox], [eval])");
  eval->add_option("--out", ea.out, "write one JSON record per candidate here");
  eval->add_option("--jobs", ea.jobs, "parallel compile jobs (default: config, else cores)");
  eval->add_option("--evaluators", ea.evaluators, "warm evaluator processes (default: config)");
  eval->add_flag("--quiet", ea.quiet, "print only the summary");
  eval->add_flag("--show-feedback", ea.show_feedback, "print a failure's first line of feedback under its row");
  eval->add_option("--memory", ea.memory, "record every outcome in this experience-graph database (leap memory)");

  auto* tasks = app.add_subcommand("tasks", "inspect task suites");
  tasks->require_subcommand(1);
  std::string suite = "builtin", name, dir;
  auto* list = tasks->add_subcommand("list", "list the tasks of a suite");
  list->add_option("--suite", suite, "suite folder, 'builtin' or a bundled variant ('refine', 'layouts')")->capture_default_str();
  auto* show = tasks->add_subcommand("show", "show one task");
  show->add_option("name", name)->required();
  show->add_option("--suite", suite, "suite folder or 'builtin'")->capture_default_str();
  auto* check = tasks->add_subcommand("check", "validate task folders (default: the built-in suite)");
  check->add_option("dir", dir, "suite or task folder");
  leap::ImportArgs ia;
  auto* import = tasks->add_subcommand("import", "import problems from another benchmark as leap tasks");
  import->require_subcommand(1);
  auto* kernelbench = import->add_subcommand("kernelbench", "KernelBench-format problems (Model, get_inputs, get_init_inputs)");
  kernelbench->add_option("src", ia.src, "a KernelBench checkout or a folder of problem files")->required();
  kernelbench->add_option("--out", ia.out, "folder to write the tasks into (a suite)")->required();
  kernelbench->add_option("--levels", ia.levels, "levels to import")->capture_default_str();
  kernelbench->add_option("--problems", ia.problems, "file name pattern")->capture_default_str();
  kernelbench->add_option("--python", ia.python, "Python whose PyTorch matches leap's LibTorch (default: found)");
  kernelbench->add_option("--fp32-tolerance", ia.fp32_tolerance,
                          "atol = rtol of float32 outputs (KernelBench v0/v0.1: 0.01; its latest eval: 1e-4)")
      ->capture_default_str();
  kernelbench->add_option("--device", ia.device, "cpu, cuda or cpu,cuda: the backends to make reference modules for (default: cpu, and cuda if PyTorch sees a GPU)");

  leap::RunArgs run_args;
  auto* run = app.add_subcommand("run", "the RL loop under mpirun / srun: rank 0 coordinator, 1 learner, 2.. workers");
  run->add_option("--config", run_args.config, "TOML config (default: configs/demo.toml)");
  run->add_option("--steps", run_args.steps, "RL steps (default: [run] steps)");
  run->add_option("--run-dir", run_args.run_dir, "run directory (default: runs/<[run] name>)");
  run->add_flag("--resume", run_args.resume, "continue from the run directory's latest checkpoint");
  run->add_flag("--quiet", run_args.quiet, "no progress line per step");

  leap::BenchDcpArgs bd;
  auto* bench = app.add_subcommand("bench", "benchmarks that users run");
  bench->require_subcommand(1);
  auto* dcp = bench->add_subcommand(
      "dcp",
      "LEAP's grid: DCP ranges, rewards and baselines vs single-turn, with the config's policy (schedule, or a "
      "language model: [policy] kind = \"lm\", e.g. configs/dcp-lm.toml after bench/dcp-lm.sh's SFT): held-out "
      "accuracy at turns 1..T, evaluations and time to turn-1 and turn-T targets, over seeds");
  dcp->footer(
      "Rows (--variants): leap (>=50% failing refined, all-failed pruned, rank reward), leap-all-failed (all-failed "
      "refined too), lt50, full (unpruned), grpo (binary, group mean and std), trloo, leap-turn (advantage_baseline = "
      "turn), single-turn; kevin on request.");
  dcp->add_option("--config", bd.config, "TOML config (default: configs/demo.toml; the LM grid: configs/dcp-lm.toml)");
  dcp->add_option("--steps", bd.steps, "steps per variant (default: [run] steps)");
  dcp->add_option("--workers", bd.workers, "workers (threads, each with its evaluator)")->capture_default_str();
  dcp->add_option("--seeds", bd.seeds, "repetitions of every variant (default: [bench] seeds)");
  dcp->add_option("--target", bd.target, "held-out accuracy at turn T to reach (default: [bench] target)");
  dcp->add_option("--target-turn1", bd.target_turn1, "held-out accuracy at turn 1 to reach (default: [bench] target_turn1)");
  dcp->add_option("--eval-every", bd.eval_every, "steps between held-out evaluations (default: [bench] eval_every)");
  dcp->add_option("--held-out", bd.held_out, "tasks kept out of training (default: [bench] held_out)");
  dcp->add_option("--variants", bd.variants,
                  "variants to run (default: leap leap-all-failed lt50 full grpo trloo leap-turn single-turn)")
      ->delimiter(',');
  dcp->add_option("--out", bd.out, "folder for the variants' run directories")->capture_default_str();
  dcp->add_option("--jobs", bd.jobs, "runs at once, each a process of its own with its --workers on cores of its own "
                                     "(an equal share of the usable cores; the runs' wall-clock is then each share's)")
      ->capture_default_str();
  dcp->add_flag("--summarize", bd.summarize, "run nothing: print the table and write the report of the runs already in --out "
                                            "(same config and options)");
  dcp->add_option("--run-one", bd.run_one, "VARIANT:SEED: train and evaluate that run only (what --jobs starts)")->group("");
  dcp->add_option("--cores", bd.cores, "with --run-one: the CPUs it keeps to")->delimiter(',')->group("");
  leap::ReportArgs rp;
  auto* report = app.add_subcommand("report", "write a self-contained report.html of a run (and runs to compare)");
  report->add_option("run_dir", rp.run_dir, "run directory (leap run --run-dir)")->required();
  report->add_option("--compare", rp.compare, "further run directories, overlaid");
  report->add_option("--out", rp.out, "output file (default: RUN_DIR/report.html)");
  report->add_option("--memory", rp.memory, "memory database whose experience graph to draw (default: RUN_DIR/memory.db)");
  leap::BenchCompileHidingArgs bh;
  auto* hiding = bench->add_subcommand("compile-hiding",
                                       "serial vs farm-then-evaluate vs pipelined (cold, warm) vs load_inline builds");
  hiding->add_option("--config", bh.config, "TOML config (default: configs/demo.toml, configs/demo-cuda.toml)");
  hiding->add_option("--backend", bh.backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  hiding->add_option("--count", bh.count, "distinct candidates")->capture_default_str();
  hiding->add_option("--baseline", bh.baseline, "candidates built the KernelBench way (load_inline); 0 = none")
      ->capture_default_str();
  hiding->add_option("--python", bh.python, "Python with torch for the baseline")->capture_default_str();
  hiding->add_option("--modes", bh.modes, "modes to run (pipelined includes pipelined-warm)")
      ->check(CLI::IsMember({"serial", "farm-then-eval", "pipelined"}))
      ->delimiter(',')
      ->capture_default_str();

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

  leap::RenderArgs ra;
  auto* render = tasks->add_subcommand("render", "render a task's schedule template with a choice of knob values");
  render->add_option("task", ra.task, "task name, or 'all' with --all-to")->required();
  render->add_option("--choice", ra.choice, "KNOB=VALUE,... (order, vector, unroll, tail)");
  render->add_option("--backend", ra.backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  render->add_option("--suite", ra.suite, "suite folder or 'builtin'")->capture_default_str();
  render->add_option("--all-to", ra.all_dir, "write every choice as DIR/<task>.<choice>.cpp|cu (for leap eval)");
  render->add_flag("--compact", ra.compact, "the compact form: knob lines and an include of the task's template header (CPU)");
  render->add_option("--headers-to", ra.headers_dir, "write every task's template header as DIR/leap/schedule/<task>.h");

  leap::LmArgs la;
  auto* lm = app.add_subcommand("lm", "the language-model engine: try a model folder (docs/lm.md)");
  lm->require_subcommand(1);
  auto* generate = lm->add_subcommand("generate", "continue a prompt");
  auto* score = lm->add_subcommand("score", "the log-probability of a text");
  for (auto* c : {generate, score}) {
    c->add_option("--model", la.model, "folder with config.json, safetensors and tokenizer.json")->required();
    c->add_option("--device", la.device, "cpu or cuda")->capture_default_str();
    c->add_flag("--chat", la.chat, "wrap the text in the chat template as a user turn");
  }
  generate->add_option("--prompt", la.text, "the prompt")->required();
  score->add_option("--text", la.text, "the text")->required();
  generate->add_option("--max-tokens", la.max_tokens, "tokens to generate at most")->capture_default_str();
  generate->add_option("--temperature", la.temperature, "0: greedy")->capture_default_str();
  generate->add_option("--top-p", la.top_p, "nucleus sampling")->capture_default_str();
  generate->add_option("--top-k", la.top_k, "0: all tokens")->capture_default_str();
  generate->add_option("--seed", la.seed, "sampling seed")->capture_default_str();
  generate->add_option("--batch", la.batch, "decode the prompt this many times together (seeds --seed, --seed + 1, ...): throughput at a worker's batch size")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));

  auto* lm_bench = lm->add_subcommand(
      "bench", "decode throughput, memory and the training forward+backward of a model folder (JSON on stdout; bench/lm_bench.py)");
  lm_bench->add_option("--model", la.model, "folder with config.json and safetensors")->required();
  lm_bench->add_option("--device", la.device, "cpu or cuda")->capture_default_str();
  lm_bench->add_option("--batch", la.batch, "prompts decoded together")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{4096}));
  lm_bench->add_option("--prompt-len", la.prompt_len, "tokens per prompt (random ids)")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  lm_bench->add_option("--new-tokens", la.new_tokens, "tokens generated per prompt (no stop)")->capture_default_str()->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  lm_bench->add_option("--train-batch", la.train_batch, "sequences in the log-prob forward+backward (0: none)")->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{4096}));
  lm_bench->add_option("--train-len", la.train_len, "tokens per training sequence")->capture_default_str()->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  lm_bench->add_option("--decode", la.decode, "decode steps: auto (a CUDA graph on a GPU), eager, graph")
      ->check(CLI::IsMember({"auto", "eager", "graph"}))->capture_default_str();
  lm_bench->add_option("--temperature", la.temperature, "0: greedy")->capture_default_str();
  lm_bench->add_option("--top-p", la.top_p, "nucleus sampling")->capture_default_str();
  lm_bench->add_option("--top-k", la.top_k, "0: all tokens")->capture_default_str();
  lm_bench->add_option("--seed", la.seed, "prompts and sampling seed")->capture_default_str();

  leap::SftArgs sf;
  auto* sft = app.add_subcommand("sft", "supervised fine-tuning of a model folder on kernel sources (docs/lm.md)");
  sft->add_option("--model", sf.model, "a Hugging Face folder (config.json, safetensors, tokenizer.json)")->required();
  sft->add_option("--data", sf.data, "a folder of TASK.*.cpp|cu sources, or a JSONL of {prompt, completion}")->required();
  sft->add_option("--out", sf.out, "the fine-tuned model's folder (and sft.jsonl); must be empty or new")->required();
  sft->add_flag("--force", sf.force, "replace what a non-empty --out holds");
  sft->add_option("--suite", sf.suite, "the tasks the sources are for")->capture_default_str();
  sft->add_option("--prompt", sf.prompt, "the prompts' template file (the [policy] prompt the model will see)");
  sft->add_option("--backend", sf.backend, "the prompts' backend")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  sft->add_option("--refine", sf.refine,
                  "a `leap eval` JSONL of --data's sources: also train turn 2, each failed source with its verdict "
                  "followed by a passing source of its task");
  sft->add_option("--feedback-chars", sf.feedback_chars, "of a verdict's feedback in turn 2 ([policy] feedback_chars)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  sft->add_option("--steps", sf.steps, "optimizer steps")->capture_default_str();
  sft->add_option("--batch", sf.batch, "examples per step")->capture_default_str();
  sft->add_option("--lr", sf.lr, "AdamW learning rate")->capture_default_str();
  sft->add_option("--max-len", sf.max_len, "tokens per example at most")->capture_default_str();
  sft->add_option("--seed", sf.seed, "example order")->capture_default_str();
  sft->add_flag("--checkpoint", sf.checkpoint, "activation checkpointing");

  leap::MemoryArgs ma;
  auto* mem = app.add_subcommand("memory", "the experience graph memory: inspect it (docs/memory.md)");
  mem->require_subcommand(1);
  auto* mem_show = mem->add_subcommand("show", "a task's cases, ranked, with labels");
  auto* mem_stats = mem->add_subcommand("stats", "counts by status and label");
  auto* mem_export = mem->add_subcommand("export", "every case as a JSON line (sources included)");
  for (auto* c : {mem_show, mem_stats, mem_export})
    c->add_option("--path", ma.path, "the memory database (SQLite)")->required();
  mem_show->add_option("--task", ma.task, "the task (default: every task in turn)");
  mem_export->add_option("--task", ma.task, "only this task");

#ifdef LEAP_HAVE_SERVE
  leap::agent::AgentOptions ag;
  std::string ag_backend = "cpu";
  auto* agent_cmd = app.add_subcommand("agent", "refine every task with a chat model and leap's memory (docs/memory.md)");
  agent_cmd->add_option("--endpoint", ag.endpoint.url, "OpenAI-compatible server (http://host:port)");
  agent_cmd->add_option("--model", ag.endpoint.model, "the model's name at the endpoint");
  agent_cmd->add_option("--model-dir", ag.model_dir, "or leap's own engine: a Hugging Face model folder (docs/lm.md)");
  agent_cmd->add_option("--lm-device", ag.lm_device, "the engine's device: cpu or cuda")->capture_default_str();
  agent_cmd->add_option("--seed", ag.seed, "the engine's sampling seed")->capture_default_str();
  agent_cmd->add_option("--suite", ag.suite, "suite folder, 'builtin' or a bundled variant ('refine', 'layouts')")->capture_default_str();
  agent_cmd->add_option("--tasks", ag.tasks, "only these tasks")->delimiter(',');
  agent_cmd->add_option("--backend", ag_backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  agent_cmd->add_option("--config", ag.config, "TOML config ([compile], [sandbox], [eval])");
  agent_cmd->add_option("--turns", ag.turns, "attempts per task")->capture_default_str();
  agent_cmd->add_option("--memory", ag.memory, "the experience graph (default: [memory] path, else OUT/memory.db)");
  agent_cmd->add_option("--context", ag.context, "active, passive or none (default: [memory] context, active)");
  agent_cmd->add_option("--budget", ag.budget_tokens, "context tokens at most (default: [memory] budget_tokens, 2048)");
  agent_cmd->add_option("--out", ag.out, "folder for attempts.jsonl (and memory.db)")->capture_default_str();
  agent_cmd->add_flag("--resume", ag.resume, "--out is an earlier run's: append to its attempts and keep its memory");
  agent_cmd->add_flag("--force", ag.force, "--out may hold an earlier run: replace it");
  agent_cmd->add_option("--temperature", ag.endpoint.temperature, "sampling temperature")->capture_default_str();
  agent_cmd->add_option("--max-tokens", ag.endpoint.max_tokens, "answer tokens at most")->capture_default_str();
  agent_cmd->add_option("--timeout", ag.endpoint.timeout_s, "seconds per request")->capture_default_str();
  agent_cmd->add_option("--retries", ag.endpoint.retries, "further attempts of a failed request")->capture_default_str();
  agent_cmd->add_option("--parallel", ag.parallel, "requests at once")->capture_default_str();
#endif

  leap::ServeArgs sa;
  auto* serve = app.add_subcommand("serve", "the evaluation cluster as an HTTP reward service (docs/serve.md)");
  serve->add_option("--config", sa.config, "TOML config ([serve], [sandbox], [eval], [compile])");
  serve->add_option("--bind", sa.bind, "address to listen on (default: [serve] bind, 127.0.0.1)");
  serve->add_option("--port", sa.port, "port (default: [serve] port, 8471; 0: any free port)")->check(CLI::Range(0, 65535));
  serve->add_option("--suite", sa.suite, "tasks served: suite folder, 'builtin' or a bundled variant ('refine', 'layouts') (default: [serve] suite)");
  serve->add_option("--backend", sa.backend, "cpu or cuda (default: [serve] backend)")->check(CLI::IsMember({"cpu", "cuda"}));
  serve->add_option("--evaluators", sa.evaluators, "judges (default: [sandbox] evaluators)");
  serve->add_option("--queue-limit", sa.queue_limit, "queued evaluations at most (default: [serve] queue_limit)");
  serve->add_flag("--no-cache", sa.no_cache, "evaluate every request, even one answered before");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "leap: error: " << usage_error(app, argc, argv, e) << "\nRun with --help for more information.\n";
    return 2;  // a usage error, as for any other command-line tool
  }
  std::signal(SIGPIPE, SIG_IGN);
  try {
    if (*eval) return leap::run_eval(ea);
    if (*run) return leap::run_run(run_args, argc, argv);
    if (*list) return leap::run_tasks_list(suite);
    if (*show) return leap::run_tasks_show(suite, name);
    if (*render) {
      if (ra.task == "all" && ra.all_dir.empty() && ra.headers_dir.empty())
        throw leap::LeapError(
            "leap tasks render all: --all-to DIR is required (every choice of every task is many files), or --headers-to "
            "DIR for the template headers only");
      return leap::run_tasks_render(ra);
    }
    if (*dcp) return leap::run_bench_dcp(bd);
    if (*hiding) return leap::run_bench_compile_hiding(bh);
    if (*report) return leap::run_report(rp);
    if (*check) return leap::run_tasks_check(dir.empty() ? "builtin" : dir);
    if (*kernelbench) return leap::run_tasks_import_kernelbench(ia);
    if (*lm) {
      la.score = score->parsed();
      la.bench = lm_bench->parsed();
      return leap::run_lm(la);
    }
#ifdef LEAP_HAVE_SERVE
    if (*agent_cmd) {
      ag.backend = *leap::backend_from(ag_backend);
      return leap::run_agent(ag);
    }
#endif
    if (*sft) return leap::run_sft(sf);
    if (*mem) {
      ma.what = mem_show->parsed() ? "show" : mem_stats->parsed() ? "stats" : "export";
      return leap::run_memory(ma);
    }
    if (*serve_bench || *memory_bench || *lm_bench_py) {
      // The client side is Python, like the trainers that call the service and the model servers.
      auto* sub = *serve_bench ? serve_bench : *memory_bench ? memory_bench : lm_bench_py;
      std::vector<std::string> args{"/usr/bin/python3", leap::data_dir() + "/bench/" + sub->get_name() + "_bench.py",
                                    "--build", std::filesystem::path(leap::evald_path()).parent_path().string()};
      for (const auto& r : sub->remaining()) args.push_back(r);
      std::vector<char*> argv_c;
      for (auto& s : args) argv_c.push_back(s.data());
      argv_c.push_back(nullptr);
      ::execv(argv_c[0], argv_c.data());
      throw leap::LeapError(std::string("leap bench ") + sub->get_name() + ": cannot run /usr/bin/python3: " +
                            std::strerror(errno));
    }
    if (*serve) {
#ifdef LEAP_HAVE_SERVE
      return leap::run_serve(sa);
#else
      throw leap::LeapError("this leap was built without cpp-httplib (Debian: libcpp-httplib-dev): no leap serve");
#endif
    }
  } catch (const leap::LeapError& e) {
    std::cerr << "leap: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "leap: internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
