// leap: the command-line entry point: the list of subcommands (each registers itself in its
// apps/*_command.cpp), usage errors, and exit codes. Owns no logic.
#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>

#include "apps/commands.h"
#include "common/error.h"

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
  leap::Commands commands(argc, argv);
  leap::add_eval_command(app, commands);
  leap::add_tasks_command(app, commands);
  leap::add_run_command(app, commands);
  leap::add_bench_command(app, commands);
  leap::add_report_command(app, commands);
  leap::add_lm_command(app, commands);
  leap::add_sft_command(app, commands);
  leap::add_memory_command(app, commands);
#ifdef LEAP_HAVE_SERVE
  leap::add_agent_command(app, commands);
  leap::add_serve_command(app, commands);
#else
  commands.add(app.add_subcommand("serve", "the evaluation cluster as an HTTP reward service (docs/serve.md)")
                   ->allow_extras(),
               []() -> int {
                 throw leap::LeapError("this leap was built without cpp-httplib (Debian: libcpp-httplib-dev): no leap serve");
               });
#endif

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
    return commands.run();
  } catch (const leap::LeapError& e) {
    std::cerr << "leap: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "leap: internal error: " << e.what() << "\n";
    return 3;
  }
}

namespace leap {

int Commands::run() const {
  // The innermost parsed subcommand's action (`leap tasks list`: list's, not tasks').
  const std::function<int()>* chosen = nullptr;
  for (const auto& [sub, action] : actions_)
    if (sub->parsed()) chosen = &action;
  return chosen ? (*chosen)() : 0;
}

}  // namespace leap
