// `leap agent`: multi-turn refinement of a suite's tasks by a chat model, with leap's memory.
// Under mpirun, rank 0 runs the agent (model, memory) and ranks >= 1 compile and judge its
// candidates (the workers of leap serve), each with its own compile farm and judges.
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "agent/agent.h"
#include "apps/commands.h"
#include "apps/mpi_cluster.h"
#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "common/paths.h"
#include "serve/eval_service.h"
#include "serve/serve_worker.h"

namespace leap {
namespace {

// A turn's candidates through the service (its workers), every outcome waited for.
std::vector<EvalOutcome> evaluate_remote(serve::EvalService& service, const EvalConfig& settings,
                                         const std::vector<CandidateSource>& cands) {
  std::vector<std::pair<std::string, std::string>> ids;  // service id, candidate name
  for (const auto& c : cands) {
    for (;;) {
      auto r = service.submit({c.task, c.name, c.source, settings, "", ""});
      if (r.kind == serve::SubmitResult::Kind::accepted) {
        ids.emplace_back(r.id, c.name);
        break;
      }
      if (r.kind == serve::SubmitResult::Kind::draining) throw LeapError("agent: the evaluation service is stopping");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // queue full: the workers catch up
    }
  }
  std::vector<EvalOutcome> out;
  for (const auto& [id, name] : ids) {
    auto v = service.wait(id, 24 * 3600.0);
    if (!v || v->state != serve::JobState::done) throw LeapError("agent: evaluation " + id + " did not finish");
    EvalOutcome o = v->outcome;
    o.candidate = name;
    out.push_back(std::move(o));
  }
  return out;
}

void print_results(const agent::AgentOptions& o, const agent::AgentRun& run, const std::string& where) {
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
             "{} prompt tokens sent (about 4 bytes each). Attempts: {}/attempts.jsonl, memory: {}. Judged {}.\n",
             solved, results.size(), o.turns, run.context, solved ? turns_to_solve / solved : 0.0, tokens, o.out,
             run.memory, where);
}

}  // namespace

int run_agent(agent::AgentOptions o) {
  if (!launched_by_mpi()) {
    print_results(o, agent::run_agent(o, evald_path()), "here");
    return 0;
  }
  zmq::context_t ctx;
  Cluster cluster = join_cluster(ctx);
  LeapConfig cfg = o.config.empty() ? LeapConfig{} : load_config(o.config);
  cfg.serve.cache = false;  // every attempt judged, as without mpirun
  std::vector<Task> tasks;
  for (auto& t : load_suite(o.suite))
    if (t.supports(o.backend)) tasks.push_back(std::move(t));
  if (cluster.rank > 0) {
    serve::run_serve_worker(cfg, o.backend, tasks, evald_path(), *cluster.links, role_logger("agent-worker"));
    leave_cluster(cluster);
    return 0;
  }
  agent::AgentRun run;
  std::string where = "here";
  if (cluster.size == 1) {
    run = agent::run_agent(o, evald_path());
  } else {
    serve::RemoteWorkers remote{cluster.links.get(), cfg.serve.worker_timeout_s};
    serve::EvalService service(cfg, o.backend, tasks, evald_path(), role_logger("agent"), remote);
    run = agent::run_agent(o, evald_path(), [&](const std::vector<Task>&, const std::vector<CandidateSource>& cands) {
      return evaluate_remote(service, cfg.eval, cands);
    });
    where = fmt::format("on {} worker rank(s)", cluster.size - 1);
  }  // the service's destructor tells the workers to stop
  leave_cluster(cluster);
  print_results(o, run, where);
  return 0;
}

}  // namespace leap
