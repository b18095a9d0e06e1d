// `leap agent`: multi-turn refinement of a suite's tasks by a chat model, with leap's memory.
#include <fmt/format.h>

#include <iostream>

#include "agent/agent.h"
#include "apps/commands.h"
#include "common/paths.h"

namespace leap {

int run_agent(agent::AgentOptions o) {
  auto run = agent::run_agent(o, evald_path());
  const auto& results = run.tasks;
  fmt::print("| task | solved at turn | best speedup | attempts | endpoint failures | prompt tokens |\n");
  fmt::print("|---|---:|---:|---:|---:|---:|\n");
  size_t solved = 0, tokens = 0;
  double turns_to_solve = 0;
  for (const auto& r : results) {
    fmt::print("| {} | {} | {:.3f} | {} | {} | {} |\n", r.task, r.first_solved_turn ? std::to_string(r.first_solved_turn) : "-",
               r.best_speedup, r.attempts, r.infra_errors, r.prompt_tokens);
    solved += r.first_solved_turn > 0;
    turns_to_solve += r.first_solved_turn;
    tokens += r.prompt_tokens;
  }
  fmt::print("\n{} of {} tasks solved within {} turns (context {}); mean turn of the first solve {:.2f}; "
             "{} prompt tokens sent (about 4 bytes each). Attempts: {}/attempts.jsonl, memory: {}\n",
             solved, results.size(), o.turns, run.context, solved ? turns_to_solve / solved : 0.0, tokens, o.out,
             run.memory);
  return 0;
}

}  // namespace leap
