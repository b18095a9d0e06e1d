#include "loop/loop_wiring.h"

#include <fmt/format.h>

#include <exception>
#include <mutex>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/run_dir.h"
#include "coordinator/coordinator_role.h"
#include "evaluation/eval_pipeline.h"
#include "learner/learner_role.h"
#include "learner/settings.h"
#include "policy/policy.h"
#include "worker/worker_role.h"

namespace fs = std::filesystem;

namespace leap {

RunPlan make_plan(const LeapConfig& cfg, const std::string& config_text, const std::string& run_dir) {
  RunPlan p;
  p.cfg = cfg;
  p.config_text = config_text;
  p.backend = *backend_from(cfg.run.backend);
  p.run_dir = run_dir.empty() ? "runs/" + cfg.run.name : run_dir;
  auto policy = make_policy(cfg.policy, cfg.run.seed);
  auto suite = load_suite(cfg.run.suite);
  if (cfg.run.tasks.empty()) {
    for (auto& t : suite)
      if (policy->can_write(t, p.backend)) p.tasks.push_back(std::move(t));
  } else {
    for (const auto& name : cfg.run.tasks) {
      auto it = std::find_if(suite.begin(), suite.end(), [&](const Task& t) { return t.name == name; });
      if (it == suite.end()) throw LeapError("[run] tasks: no task named '" + name + "' in " + cfg.run.suite);
      if (!policy->can_write(*it, p.backend))
        throw LeapError(fmt::format("[run] tasks: the {} policy cannot write task '{}' on the {} backend",
                                    cfg.policy.kind, name, cfg.run.backend));
      p.tasks.push_back(*it);
    }
  }
  if (p.tasks.empty()) throw LeapError("no task of " + cfg.run.suite + " can be written by the " + cfg.policy.kind + " policy");
  validate(dcp_config(cfg.learner));
  return p;
}

void prepare_run_dir(RunPlan& plan, bool resume) {
  const std::string& d = plan.run_dir;
  if (resume) {
    auto ck = latest_checkpoint(d);
    if (!ck) throw LeapError(d + ": no complete checkpoint to resume from (run without --resume to start afresh)");
    plan.resume_dir = ck->dir;
    plan.start_step = ck->step;
    if (plan.start_step >= plan.cfg.run.steps)
      throw LeapError(fmt::format("{}: the latest checkpoint has {} steps already; raise --steps to continue", d,
                                  plan.start_step));
  } else if (fs::exists(d + "/metrics.jsonl") || fs::exists(d + "/checkpoints")) {
    throw LeapError(d + " holds a run already: continue it with --resume, or choose another --run-dir");
  }
  fs::create_directories(d + "/logs");
  fs::create_directories(d + "/checkpoints");
  std::ofstream(d + "/config.toml", std::ios::trunc) << plan.config_text;
}

void run_role(const RunPlan& plan, LoopLinks& links, WeightChannel* weights) {
  const int rank = links.rank();
  const std::string role = rank == 0 ? "coordinator" : rank == 1 ? "learner" : "worker";
  auto log = run_logger(fmt::format("{}-{}@{}", role, rank, plan.run_dir), fmt::format("{}:{}", role, rank),
                        fmt::format("{}/logs/rank-{}.log", plan.run_dir, rank), rank == 0);
  const auto& cfg = plan.cfg;
  if (rank == 0) {
    CoordinatorSettings s{cfg.run, cfg.learner.group_size, cfg.learner.max_turns, {}, plan.run_dir, plan.resume_dir,
                          plan.progress, plan.progress_label};
    for (const auto& t : plan.tasks) s.tasks.push_back(t.name);
    CoordinatorRole c(links, s, log);
    try {
      c.run();
    } catch (const std::exception& e) {
      auto ck = latest_checkpoint(plan.run_dir);
      log->error("the run stops: {}. Last complete checkpoint: {}.{}", e.what(), ck ? ck->dir : "none",
                 ck ? " Continue with: leap run --resume (same config and run directory)" : "");
      if (!stop_requested()) c.stop_all(e.what());  // when stopping already, every role knows
      throw;
    }
    return;
  }
  if (!weights) throw LeapError("rank " + std::to_string(rank) + " has no weight channel");
  auto policy = make_policy(cfg.policy, cfg.run.seed);
  if (rank == 1) {
    LearnerSettings ls;
    ls.dcp = dcp_config(cfg.learner);
    ls.reward = reward_config(cfg.learner);
    ls.run_dir = plan.run_dir;
    ls.resume_dir = plan.resume_dir;
    ls.start_step = plan.start_step;
    if (cfg.memory.record) ls.memory_path = cfg.memory.path.empty() ? plan.run_dir + "/memory.db" : cfg.memory.path;
    ls.backend = to_string(plan.backend);
    ls.serve_context = cfg.memory.prompts;
    ls.context = memory::context_settings(cfg.memory);
    LearnerRole l(links, *weights, *policy, ls, log);
    l.run();
    return;
  }
  EvalPipeline pipeline(cfg, plan.backend, evald_path(), log);
  WorkerRole w(links, *weights, *policy, pipeline, plan.tasks, plan.backend, log, cfg.memory.prompts);
  w.run();
}

void run_in_process(RunPlan plan, int workers, bool resume) {
  prepare_run_dir(plan, resume);
  const int world = workers + 2;
  zmq::context_t ctx;
  std::vector<std::string> endpoints;
  std::vector<std::unique_ptr<MessageSocket>> inboxes;
  static int instance = 0;
  const int id = instance++;
  for (int r = 0; r < world; ++r) {
    inboxes.push_back(std::make_unique<MessageSocket>(ctx, zmq::socket_type::pull));
    endpoints.push_back(inboxes.back()->bind(fmt::format("inproc://leap-run-{}-{}", id, r)));
  }
  InProcessWeightChannel channel(world - 1);
  std::exception_ptr first_error;  // the cause; later errors are other roles giving up
  std::mutex error_mu;
  stop_requested() = false;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        LoopLinks links(ctx, r, std::move(inboxes[static_cast<size_t>(r)]), endpoints);
        run_role(plan, links, r == 0 ? nullptr : &channel);
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!first_error) first_error = std::current_exception();
        }
        stop_requested() = true;  // the other roles leave their loops
        channel.abort();
      }
    });
  for (auto& t : threads) t.join();
  stop_requested() = false;
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace leap
