// `leap agent`: multi-turn refinement of a suite's tasks by a chat model, with leap's memory.
// Under mpirun, rank 0 runs the agent (model, memory) and ranks >= 1 compile and judge its
// candidates (the workers of leap serve), each with its own compile farm and judges.
#include <CLI/CLI.hpp>

#include <memory>
#include <fmt/format.h>

#include <iostream>

#include "agent/agent.h"
#include "apps/commands.h"
#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "common/mpi_cluster.h"
#include "common/paths.h"
#include "serve/eval_service.h"
#include "serve/serve_worker.h"

namespace leap {
namespace {

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

static int run_agent(agent::AgentOptions o) {
  if (!launched_by_mpi()) {
    print_results(o, agent::run_agent(o, evald_path()), "here");
    return 0;
  }
  zmq::context_t ctx;
  Cluster cluster = join_cluster(ctx);
  LeapConfig cfg = o.config.empty() ? LeapConfig{} : load_config(o.config);
  cfg.serve.cache = false;  // every attempt judged, as without mpirun
  // The workers judge exactly the tasks the agent will send.
  const std::vector<Task> tasks = agent::select_tasks(o);
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
      std::vector<serve::Submission> subs;
      for (const auto& c : cands) subs.push_back({c.task, c.name, c.source, cfg.eval, "", "", "", c.format});
      auto out = service.evaluate_all(std::move(subs));
      for (size_t i = 0; i < out.size(); ++i) out[i].candidate = cands[i].name;
      return out;
    });
    where = fmt::format("on {} worker rank(s)", cluster.size - 1);
  }  // the service's destructor tells the workers to stop
  leave_cluster(cluster);
  print_results(o, run, where);
  return 0;
}

void add_agent_command(CLI::App& app, Commands& c) {
  auto ag = std::make_shared<agent::AgentOptions>();
  auto ag_backend = std::make_shared<std::string>("cpu");
  auto* agent_cmd = app.add_subcommand("agent", "refine every task with a chat model and leap's memory (docs/memory.md)");
  agent_cmd->add_option("--endpoint", ag->endpoint.url, "OpenAI-compatible server (http://host:port)");
  agent_cmd->add_option("--model", ag->endpoint.model, "the model's name at the endpoint");
  agent_cmd->add_option("--model-dir", ag->model_dir, "or leap's own engine: a Hugging Face model folder (docs/lm.md)");
  agent_cmd->add_option("--lm-device", ag->lm_device, "the engine's device: cpu or cuda")->capture_default_str();
  agent_cmd->add_option("--seed", ag->seed, "the engine's sampling seed")->capture_default_str();
  agent_cmd->add_option("--suite", ag->suite, "suite folder, 'builtin' or a bundled variant ('refine', 'layouts')")->capture_default_str();
  agent_cmd->add_option("--tasks", ag->tasks, "only these tasks")->delimiter(',');
  agent_cmd->add_option("--backend", *ag_backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  agent_cmd->add_option("--config", ag->config, "TOML config ([compile], [sandbox], [eval])");
  agent_cmd->add_option("--turns", ag->turns, "attempts per task")->capture_default_str();
  agent_cmd->add_option("--memory", ag->memory, "the experience graph (default: [memory] path, else OUT/memory.db)");
  agent_cmd->add_option("--context", ag->context, "active, passive, previous (the graph off) or none (default: [memory] context, active)");
  agent_cmd->add_option("--budget", ag->budget_tokens, "context tokens at most (default: [memory] budget_tokens, 2048)");
  agent_cmd->add_option("--out", ag->out, "folder for attempts.jsonl (and memory.db)")->capture_default_str();
  agent_cmd->add_flag("--resume", ag->resume, "--out is an earlier run's: append to its attempts and keep its memory");
  agent_cmd->add_flag("--force", ag->force, "--out may hold an earlier run: replace it");
  agent_cmd->add_option("--temperature", ag->endpoint.temperature, "sampling temperature")->capture_default_str();
  agent_cmd->add_option("--max-tokens", ag->endpoint.max_tokens, "answer tokens at most")->capture_default_str();
  agent_cmd->add_option("--timeout", ag->endpoint.timeout_s, "seconds per request")->capture_default_str();
  agent_cmd->add_option("--retries", ag->endpoint.retries, "further attempts of a failed request")->capture_default_str();
  agent_cmd->add_option("--parallel", ag->parallel, "requests at once")->capture_default_str();
  c.add(agent_cmd, [ag, ag_backend] {
    ag->backend = *backend_from(*ag_backend);
    return run_agent(*ag);
  });
}

}  // namespace leap
