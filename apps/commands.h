// `leap` subcommands. Each command file registers its own subcommand: its options on the
// application and the action to run once the command line is parsed (apps/leap.cpp lists them).
// An action returns the process exit code; usage and configuration errors are LeapError
// exceptions, turned into a message and exit code 2 by main().
#pragma once
#include <functional>
#include <utility>
#include <vector>

namespace CLI {
class App;
}

namespace leap {

class Commands {
 public:
  Commands(int argc, char** argv) : argc_(argc), argv_(argv) {}
  // `action` runs when `sub` is the (innermost) subcommand on the command line.
  void add(CLI::App* sub, std::function<int()> action) { actions_.emplace_back(sub, std::move(action)); }
  int run() const;  // the parsed subcommand's action; 0 when none was given
  int argc() const { return argc_; }
  char** argv() const { return argv_; }

 private:
  int argc_;
  char** argv_;
  std::vector<std::pair<CLI::App*, std::function<int()>>> actions_;
};

void add_eval_command(CLI::App& app, Commands& c);    // leap eval
void add_tasks_command(CLI::App& app, Commands& c);   // leap tasks list | show | check | render | import kernelbench
void add_run_command(CLI::App& app, Commands& c);     // leap run (the MPI program)
void add_bench_command(CLI::App& app, Commands& c);   // leap bench dcp | compile-hiding | serve | memory | lm
void add_report_command(CLI::App& app, Commands& c);  // leap report
void add_lm_command(CLI::App& app, Commands& c);      // leap lm generate | score | bench
void add_sft_command(CLI::App& app, Commands& c);     // leap sft
void add_memory_command(CLI::App& app, Commands& c);  // leap memory show | stats | export
void add_serve_command(CLI::App& app, Commands& c);   // leap serve (an error in builds without cpp-httplib)
void add_agent_command(CLI::App& app, Commands& c);   // leap agent (builds with cpp-httplib)

}  // namespace leap
