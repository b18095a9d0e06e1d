// `leap serve`: the evaluation cluster as an HTTP reward service (docs/serve.md).
#include <CLI/CLI.hpp>

#include <memory>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "apps/commands.h"
#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "common/loop_links.h"
#include "common/mpi_cluster.h"
#include "common/paths.h"
#include "serve/eval_service.h"
#include "serve/http_api.h"
#include "serve/serve_worker.h"

namespace leap {

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

static int run_serve(const ServeArgs& a) {
  LeapConfig cfg = a.config.empty() ? LeapConfig{} : load_config(a.config);
  auto& s = cfg.serve;
  if (!a.bind.empty()) s.bind = a.bind;
  if (a.port >= 0) s.port = a.port;
  if (!a.suite.empty()) s.suite = a.suite;
  if (!a.backend.empty()) s.backend = a.backend;
  if (a.evaluators > 0) cfg.sandbox.evaluators = a.evaluators;
  if (a.queue_limit > 0) s.queue_limit = a.queue_limit;
  if (a.no_cache) s.cache = false;
  std::string token = s.token;
  if (token.empty())
    if (const char* env = std::getenv("LEAP_SERVE_TOKEN")) token = env;
  if (token.empty() && !serve::is_loopback(s.bind))
    throw LeapError("leap serve: binding " + s.bind +
                    " (not loopback) needs a bearer token: set [serve] token or LEAP_SERVE_TOKEN");
  auto tasks = load_suite(s.suite);
  const Backend backend = s.backend == "cuda" ? Backend::cuda : Backend::cpu;
  size_t served = 0;
  for (const auto& t : tasks) served += t.supports(backend);
  if (served == 0) throw LeapError("leap serve: suite '" + s.suite + "' has no task for the " + s.backend + " backend");

  // MPI: ranks >= 1 are workers (their own compile farm and judges), rank 0 the front door;
  // after the endpoint exchange only ZeroMQ is used, so the others outlive a lost worker
  // (mpirun --enable-recovery keeps the job running).
  // Signals are taken by one thread (sigwait), so every thread started from here blocks them
  // (MPI's and ZeroMQ's included: a stop signal interrupting their calls ends nothing cleanly).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  zmq::context_t ctx;
  Cluster cluster = join_cluster(ctx);
  const int rank = cluster.rank, size = cluster.size;
  auto& links = cluster.links;
  auto log = role_logger(rank == 0 ? "serve" : "serve-worker");
  if (rank > 0) {
    // mpirun forwards its SIGTERM to every rank: a worker ends once rank 0 says stop (after its
    // drain), or, should rank 0 be gone, once it has been idle a while after the signal.
    std::thread([stop_signals] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      stop_requested() = true;
    }).detach();
    serve::run_serve_worker(cfg, backend, tasks, evald_path(), *links, log);
    leave_cluster(cluster);
    return 0;
  }

  serve::RemoteWorkers remote;
  if (size > 1) {
    remote.links = links.get();
    remote.worker_timeout_s = s.worker_timeout_s;
  }
  {
    serve::EvalService service(cfg, backend, std::move(tasks), evald_path(), log, remote);
    serve::HttpApi api(service, s, token, cfg.learner);
    const int port = api.bind(s.bind, s.port);
    std::cout << "leap serve: listening on http://" << s.bind << ":" << port << " (" << s.backend << " backend, "
              << (size > 1 ? std::to_string(size - 1) + " worker rank(s)" : std::to_string(service.metrics().evaluators) + " evaluator(s)")
              << ", " << served << " tasks" << (token.empty() ? "" : ", token required") << ")" << std::endl;

    std::thread stopper([&] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      std::cout << "leap serve: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
                << ": no new evaluations; finishing the queued and running ones" << std::endl;
      bool drained = service.drain(s.max_wait_s);
      std::cout << "leap serve: " << (drained ? "every accepted evaluation finished" : "stopped with evaluations unfinished")
                << std::endl;
      api.stop();
    });
    api.serve();
    stopper.join();
  }  // the service's destructor has told the workers to stop
  leave_cluster(cluster);
  return 0;
}

void add_serve_command(CLI::App& app, Commands& c) {
  auto sa = std::make_shared<ServeArgs>();
  auto* serve = app.add_subcommand("serve", "the evaluation cluster as an HTTP reward service (docs/serve.md)");
  serve->add_option("--config", sa->config, "TOML config ([serve], [sandbox], [eval], [compile])");
  serve->add_option("--bind", sa->bind, "address to listen on (default: [serve] bind, 127.0.0.1)");
  serve->add_option("--port", sa->port, "port (default: [serve] port, 8471; 0: any free port)")->check(CLI::Range(0, 65535));
  serve->add_option("--suite", sa->suite, "tasks served: suite folder, 'builtin' or a bundled variant ('refine', 'layouts') (default: [serve] suite)");
  serve->add_option("--backend", sa->backend, "cpu or cuda (default: [serve] backend)")->check(CLI::IsMember({"cpu", "cuda"}));
  serve->add_option("--evaluators", sa->evaluators, "judges (default: [sandbox] evaluators)");
  serve->add_option("--queue-limit", sa->queue_limit, "queued evaluations at most (default: [serve] queue_limit)");
  serve->add_flag("--no-cache", sa->no_cache, "evaluate every request, even one answered before");
  c.add(serve, [sa] { return run_serve(*sa); });
}

}  // namespace leap
