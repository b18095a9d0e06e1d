// `leap run`: the MPI program. Rank 0 coordinator, rank 1 learner, ranks >= 2 workers. MPI
// bootstraps (launch checks, run directory decision, ZeroMQ endpoint exchange, the weight
// communicator); the roles then talk over ZeroMQ and broadcast weights over NCCL or MPI.
#include <CLI/CLI.hpp>

#include <memory>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/commands.h"
#include "common/backend.h"
#include "common/error.h"
#include "common/mpi_bootstrap.h"
#include "common/mpi_weight_channel.h"
#include "common/paths.h"
#include "loop/loop_wiring.h"
#include "report/report.h"

extern char** environ;

namespace leap {

struct RunArgs {
  std::string config;   // "" = configs/demo.toml
  std::string run_dir;  // "" = runs/<[run] name>
  int steps = 0;        // 0 = the config's
  bool resume = false;
  bool quiet = false;
};
namespace {

// Every rank learns whether any rank failed; the first failing rank's message is printed once.
bool agree(const std::string& my_error, int rank) {
  int ok = my_error.empty() ? 1 : 0, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all) return true;
  auto errors = allgather_strings(MPI_COMM_WORLD, my_error);
  if (rank == 0)
    for (size_t r = 0; r < errors.size(); ++r)
      if (!errors[r].empty()) {
        std::cerr << "leap: error" << (r ? " (rank " + std::to_string(r) + ")" : "") << ": " << errors[r] << "\n";
        break;
      }
  return false;
}

// Node-local GPU order among the learner and workers (the coordinator needs none), set before
// anything initialises CUDA (LibTorch does when the policy is built). Returns every rank's host;
// `all_own`: every rank of the weights' communicator has a GPU of its own.
std::vector<std::string> place_gpus(int rank, int size, int* all_own) {
  LaunchInfo info = launch_info(MPI_COMM_WORLD);
  auto hosts = allgather_strings(MPI_COMM_WORLD, info.host);
  int gpu_index = 0, sharing = 0;
  for (int r = 1; r < size; ++r)
    if (hosts[static_cast<size_t>(r)] == info.host) {
      if (r < rank) ++gpu_index;
      ++sharing;
    }
  auto gpus = visible_gpus();
  const bool own_gpu = !gpus.empty() && sharing <= static_cast<int>(gpus.size());
  int own_gpus = rank == 0 || own_gpu ? 1 : 0;
  MPI_Allreduce(&own_gpus, all_own, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank >= 1 && !gpus.empty()) setenv("CUDA_VISIBLE_DEVICES", gpus[static_cast<size_t>(gpu_index) % gpus.size()].c_str(), 1);
  return hosts;
}

// The weights' channel (collective over `comm`, the learner and the workers): NCCL where each has
// a GPU of its own; CUDA IPC where all of them share one GPU of one machine (unless the probe
// fails: then MPI, and the learner says why); MPI otherwise.
std::unique_ptr<WeightChannel> weight_channel(const RunPlan& plan, MPI_Comm comm, bool all_own) {
  if (plan.backend != Backend::cuda) return make_mpi_weight_channel(comm);
  if (all_own && have_nccl()) return make_nccl_weight_channel(comm, 0);
  const char* gpu = std::getenv("CUDA_VISIBLE_DEVICES");
  const auto places = allgather_strings(comm, launch_info(comm).host + "|" + (gpu ? gpu : ""));
  const bool one_gpu = gpu && *gpu &&
                       std::all_of(places.begin(), places.end(), [&](const std::string& p) { return p == places[0]; });
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (one_gpu && places.size() > 1) {
    std::string why;
    if (auto ipc = make_ipc_weight_channel(comm, &why)) return ipc;
    if (rank == 0) std::cerr << "leap: the weights go over MPI, not CUDA IPC: " << why << "\n";
  }
  return make_mpi_weight_channel(comm);
}

// Configuration and plan on every rank (each reads the same files), then rank 0 decides fresh
// start or resume point and everyone follows. False: a rank failed (its error said once).
bool agree_on_plan(const RunArgs& a, int rank, RunPlan& plan) {
  std::string error;
  try {
    std::string path = a.config.empty() ? data_dir() + "/configs/demo.toml" : a.config;
    LeapConfig cfg = load_config(path);
    if (a.steps > 0) cfg.run.steps = a.steps;
    plan = make_plan(cfg, read_file(path), a.run_dir);
    plan.progress = !a.quiet;
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!agree(error, rank)) return false;
  nlohmann::json start;
  if (rank == 0) {
    try {
      prepare_run_dir(plan, a.resume);
      start = {{"resume_dir", plan.resume_dir}, {"start_step", plan.start_step}};
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!agree(error, rank)) return false;
  start = nlohmann::json::parse(allgather_strings(MPI_COMM_WORLD, start.dump())[0]);
  plan.resume_dir = start["resume_dir"];
  plan.start_step = start["start_step"];
  return true;
}

// This rank's inbox, bound where the others reach it (loopback when every rank shares this host,
// else the routable address), and every rank's endpoint. False: a rank failed.
bool open_inbox(zmq::context_t& ctx, const RunPlan& plan, const std::vector<std::string>& hosts, int rank,
                std::unique_ptr<MessageSocket>& inbox, std::vector<std::string>& endpoints) {
  const bool one_host = std::all_of(hosts.begin(), hosts.end(), [&](const auto& h) { return h == hosts[0]; });
  std::string address = !plan.cfg.run.bind_address.empty() ? plan.cfg.run.bind_address
                        : std::getenv("LEAP_BIND_ADDRESS") ? routable_address()
                        : one_host                         ? "127.0.0.1"
                                                           : routable_address();
  inbox = std::make_unique<MessageSocket>(ctx, zmq::socket_type::pull);
  std::string endpoint, error;
  try {
    endpoint = inbox->bind("tcp://" + address + ":*");
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!agree(error, rank)) return false;
  endpoints = allgather_strings(MPI_COMM_WORLD, endpoint);
  if (rank == 0) {
    std::string list;
    for (size_t r = 0; r < endpoints.size(); ++r) list += (r ? ", " : "") + std::to_string(r) + "=" + endpoints[r];
    std::cerr << "leap: " << endpoints.size() << " ranks, inbox endpoints " << list << "\n";
  }
  return true;
}

}  // namespace

static int run_run(const RunArgs& a, int argc, char** argv) {
  // The launcher's environment, as it was before MPI_Init.
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  try {
    check_launch_before_init(env);
  } catch (const LeapError& e) {
    // Task 0 says it all; every other task its first line, since the first task to exit can
    // make srun kill the rest (task 0 among them) before they print anything.
    const char* task = std::getenv("SLURM_PROCID");
    const std::string what = e.what();
    if (!task || std::string(task) == "0") std::cerr << "leap: error: " << what << "\n";
    else std::cerr << "leap: error (task " << task << "): " << what.substr(0, what.find('\n')) << "\n";
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  try {
    check_launch(size, env);
  } catch (const LeapError& e) {
    if (rank == 0) std::cerr << "leap: error: " << e.what() << "\n";
    MPI_Finalize();
    return 2;
  }

  int all_own = 0;
  const auto hosts = place_gpus(rank, size, &all_own);
  RunPlan plan;
  zmq::context_t ctx;
  std::unique_ptr<MessageSocket> inbox;
  std::vector<std::string> endpoints;
  if (!agree_on_plan(a, rank, plan) || !open_inbox(ctx, plan, hosts, rank, inbox, endpoints)) {
    MPI_Finalize();
    return 2;
  }

  MPI_Comm weights_comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank >= 1 ? 0 : MPI_UNDEFINED, rank, &weights_comm);
  std::unique_ptr<WeightChannel> channel;
  if (rank >= 1) channel = weight_channel(plan, weights_comm, all_own != 0);
  int rc = 0;
  try {
    LoopLinks links(ctx, rank, std::move(inbox), endpoints);
    run_role(plan, links, channel.get());
    if (stop_requested()) rc = 1;
  } catch (const std::exception& e) {
    std::cerr << "leap: error (rank " << rank << "): " << e.what() << "\n";
    rc = 1;
  }
  if (rc != 0) {
    if (rank == 0) {
      // Let the stop messages reach the others, then end the job: a hung rank must not keep it alive.
      sleep(1);
    }
    MPI_Abort(MPI_COMM_WORLD, rc);
  }
  channel.reset();
  if (weights_comm != MPI_COMM_NULL) MPI_Comm_free(&weights_comm);
  MPI_Finalize();
  if (rank == 0) {  // the run's page; a failure here loses nothing of the run itself
    try {
      run_report({plan.run_dir, {}, "", ""});
    } catch (const std::exception& e) {
      std::cerr << "leap: the run finished but its report was not written: " << e.what() << "\n";
    }
  }
  return 0;
}

void add_run_command(CLI::App& app, Commands& c) {
  auto run_args = std::make_shared<RunArgs>();
  auto* run = app.add_subcommand("run", "the RL loop under mpirun / srun: rank 0 coordinator, 1 learner, 2.. workers");
  run->add_option("--config", run_args->config, "TOML config (default: configs/demo.toml)");
  run->add_option("--steps", run_args->steps, "RL steps (default: [run] steps)");
  run->add_option("--run-dir", run_args->run_dir, "run directory (default: runs/<[run] name>)");
  run->add_flag("--resume", run_args->resume, "continue from the run directory's latest checkpoint");
  run->add_flag("--quiet", run_args->quiet, "no progress line per step");
  c.add(run, [run_args, &c] { return run_run(*run_args, c.argc(), c.argv()); });
}

}  // namespace leap
