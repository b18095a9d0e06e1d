// `leap` subcommands. Each returns the process exit code; usage and configuration errors
// are LeapError exceptions, turned into a message and exit code 2 by main().
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace leap {
namespace agent {
struct AgentOptions;
}

struct EvalArgs {
  std::string tasks = "builtin";
  std::string candidates;  // "" = the bundled examples of the backend
  std::string backend = "cpu";
  std::string config;
  std::string out;
  int jobs = 0;
  int evaluators = 0;
  bool quiet = false;
  bool show_feedback = false;  // a failure's first line of feedback under its row
  std::string memory;  // record every outcome in this experience-graph database
};

struct RenderArgs {
  std::string suite = "builtin";
  std::string task;
  std::string backend = "cpu";
  std::string choice;   // "order=row,vector=4,..."; knobs not named take their first value
  std::string all_dir;  // write every choice of the task ("all": of every templated task) here
  bool compact = false;     // the compact form (knob lines + the task's template header; CPU)
  std::string headers_dir;  // write every task's template header under DIR/leap/schedule/
};

struct RunArgs {
  std::string config;   // "" = configs/demo.toml
  std::string run_dir;  // "" = runs/<[run] name>
  int steps = 0;        // 0 = the config's
  bool resume = false;
  bool quiet = false;
};

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
};

struct ServeArgs {
  std::string config;
  std::string bind;     // "" = [serve] bind
  int port = -1;        // -1 = [serve] port; 0 = any free port
  std::string suite;    // "" = [serve] suite
  std::string backend;  // "" = [serve] backend
  int evaluators = 0;   // 0 = [sandbox] evaluators
  int queue_limit = 0;  // 0 = [serve] queue_limit
  bool no_cache = false;
};

struct LmArgs {
  std::string model;         // folder: config.json, *.safetensors, tokenizer.json
  std::string text;          // the prompt (generate) or the text (score)
  bool score = false;
  bool chat = false;         // wrap the prompt in the chat template (a user turn)
  std::string device = "cpu";
  int64_t max_tokens = 64;
  double temperature = 0;    // 0: greedy
  double top_p = 1;
  int64_t top_k = 0;
  uint64_t seed = 0;
  int64_t batch = 1;         // generate: the prompt this many times in one batch (seeds seed, seed + 1, ...)
  // bench: random prompts of prompt_len tokens, new_tokens each (no stop), then the log-prob
  // forward + backward of train_batch x train_len tokens; one JSON line on stdout.
  bool bench = false;
  int64_t prompt_len = 512, new_tokens = 256, train_batch = 16, train_len = 768;
  std::string decode = "auto";  // auto | eager | graph
};

struct MemoryArgs {
  std::string what;  // show | stats | export
  std::string path;  // the memory database
  std::string task;  // show: required; export: "" = every task
};

struct SftArgs {
  std::string model, data, out;
  std::string suite = "builtin";
  std::string backend = "cpu";  // the prompts' backend (shapes, fence)
  std::string prompt;           // the prompts' template ([policy] prompt; "" = leap's)
  std::string refine;           // `leap eval` outcomes of --data's sources: second-turn examples
  int feedback_chars = 2000;    // of a verdict's feedback in those ([policy] feedback_chars)
  int steps = 50, batch = 4, max_len = 2048;
  double lr = 1e-3;
  uint64_t seed = 0;
  bool checkpoint = false;
  bool force = false;           // replace a non-empty --out
};

struct ReportArgs {
  std::string run_dir;
  std::vector<std::string> compare;
  std::string out;  // "" = RUN_DIR/report.html
  std::string memory;  // an experience graph to draw ("" = RUN_DIR/memory.db when there is one)
};

int run_eval(const EvalArgs& args);
int run_serve(const ServeArgs& args);  // only in builds with cpp-httplib (LEAP_HAVE_SERVE)
int run_lm(const LmArgs& args);        // leap lm generate | score
int run_sft(const SftArgs& args);      // leap sft
int run_memory(const MemoryArgs& args);  // leap memory show | stats | export
int run_agent(agent::AgentOptions o);   // leap agent (builds with cpp-httplib)
int run_report(const ReportArgs& args);
int run_bench_compile_hiding(const BenchCompileHidingArgs& args);
int run_bench_dcp(const BenchDcpArgs& args);
// The MPI program; initialises and finalises MPI itself.
int run_run(const RunArgs& args, int argc, char** argv);
int run_tasks_render(const RenderArgs& args);
int run_tasks_list(const std::string& suite);
int run_tasks_show(const std::string& suite, const std::string& name);
int run_tasks_check(const std::string& dir);

struct ImportArgs {
  std::string src, out, levels = "1,2,3", problems = "*.py", python, device;
  double fp32_tolerance = 0.01;
};
// `leap tasks import kernelbench`: tools/kernelbench_import.py with a PyTorch matching leap's
// LibTorch, then every written task loaded back.
int run_tasks_import_kernelbench(const ImportArgs& a);

}  // namespace leap
