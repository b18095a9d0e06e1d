// The evaluation service behind `leap serve`: a bounded queue of candidates, compiled as they
// arrive (the compile farm overlaps the queue) and evaluated by the judges as they free up, with
// the finished outcomes kept for lookup and, optionally, answered again from them.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/logger.h>

#include "common/config.h"
#include "common/outcome.h"
#include "evaluation/eval_pipeline.h"
#include "tasks/task.h"

namespace leap {
class LoopLinks;
}

namespace leap::serve {

// Evaluations on worker ranks (`mpirun -np N leap serve`): this process is rank 0 of `links`;
// a worker silent for `worker_timeout_s` is dead and its evaluations go to the others.
struct RemoteWorkers {
  LoopLinks* links = nullptr;
  double worker_timeout_s = 5;
};

struct Submission {
  std::string task;    // a task of the served suite
  std::string name;    // the candidate's name (feedback, records)
  std::string source;  // the candidate (leap's ABI or KernelBench's format, docs/candidate-abi.md)
  EvalConfig settings;       // resolved from the server's and the request's
  std::string settings_key;  // what of the settings the request chose (for the result cache)
  std::string client_id;     // an id the client chose (KernelGYM's task_id), "" if none
  // The request's Idempotency-Key, "" if none: a repeat of an accepted submission answers its id
  // instead of evaluating again (a client whose connection broke cannot tell whether it was taken).
  std::string idempotency_key;
  CandidateFormat format = CandidateFormat::leap_abi;
};

enum class JobState { queued, running, done };
std::string to_string(JobState s);

struct JobView {
  std::string id, client_id, task, name;
  JobState state = JobState::queued;
  EvalOutcome outcome;  // when done
  bool cached = false;  // answered from an earlier evaluation of the same submission
  double submitted_s = 0, started_s = 0, finished_s = 0;  // unix seconds
  size_t queue_position = 0;                              // when queued: evaluations ahead of it
};

struct SubmitResult {
  enum class Kind { accepted, queue_full, draining, key_reused } kind = Kind::accepted;
  std::string id;
  bool repeated = false;  // an earlier submission with the same Idempotency-Key: its id
};

struct Metrics {
  size_t queue_depth = 0, in_flight = 0, evaluators = 0;
  size_t workers_alive = 0, workers_lost = 0;  // worker ranks (mpirun); 0 when the judges are local
  uint64_t requeued = 0;                       // evaluations re-sent after their worker died
  uint64_t submitted = 0, rejected_full = 0, results_cache_hits = 0, compile_cache_hits = 0, compiled = 0;
  std::map<std::string, uint64_t> by_status;
  std::vector<double> latency_buckets_s;  // upper bounds
  std::vector<uint64_t> latency_counts;   // cumulative, one per bucket, then +Inf
  double latency_sum_s = 0;
  uint64_t latency_count = 0;
  double evaluations_per_s_60 = 0;  // finished evaluations over the last minute
  double uptime_s = 0;
};

class EvalService {
 public:
  // `remote`: evaluate on worker ranks instead of this process's judges.
  EvalService(const LeapConfig& cfg, Backend backend, std::vector<Task> tasks, const std::string& evald_path,
              std::shared_ptr<spdlog::logger> log, RemoteWorkers remote = {});
  ~EvalService();
  EvalService(const EvalService&) = delete;
  EvalService& operator=(const EvalService&) = delete;

  SubmitResult submit(Submission s);
  std::optional<JobView> get(const std::string& id) const;
  // Waits until the job is done or `timeout_s` passed; nullopt for an unknown id.
  std::optional<JobView> wait(const std::string& id, double timeout_s) const;
  // Waits until one of `ids` is done (or `timeout_s` passed) and returns it (nullopt: none yet).
  std::optional<JobView> wait_any(const std::vector<std::string>& ids, double timeout_s) const;
  // Submits every candidate (waiting for queue room when it is full) and waits for all of them:
  // outcomes in the order given. Throws when the service stops accepting or an evaluation does
  // not finish within `timeout_s`.
  std::vector<EvalOutcome> evaluate_all(std::vector<Submission> subs, double timeout_s = 24 * 3600.0);
  // The id the service gave a client id (KernelGYM's task_id), "" if none.
  std::string id_of_client(const std::string& client_id) const;

  const std::vector<Task>& tasks() const { return tasks_; }
  const Task* task(const std::string& name) const;
  Backend backend() const { return backend_; }
  const EvalConfig& eval_defaults() const { return cfg_.eval; }
  const std::string& device_model() const { return device_model_; }
  size_t free_slots() const;  // queue places left
  Metrics metrics() const;
  nlohmann::json workers_json() const;  // remote: [{rank, alive, lost, judges, in_flight, device}]

  // Stops accepting (submit answers draining) and waits up to `timeout_s` for every queued and
  // running evaluation to finish; true if they all did.
  bool drain(double timeout_s);

 private:
  struct Job;
  struct Worker;
  void work(size_t slot);
  void dispatch();  // remote: queued jobs to the least loaded live worker
  void receive();   // remote: outcomes and heartbeats; dead workers' jobs re-queued
  JobView view(const Job& j) const;  // mu_ held
  void finish(Job& j);               // mu_ held
  void complete(Job& j, EvalOutcome o);  // mu_ held: a judged job's outcome, counted and cached
  std::string cache_key(const Submission& s) const;

  LeapConfig cfg_;
  Backend backend_;
  std::vector<Task> tasks_;
  std::map<std::string, const Task*> by_name_;
  std::shared_ptr<spdlog::logger> log_;
  std::string device_model_;
  std::unique_ptr<EvalPipeline> pipeline_;

  mutable std::mutex mu_;
  mutable std::condition_variable work_cv_, done_cv_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  std::map<std::string, std::string> client_ids_;
  std::map<std::string, std::string> idempotency_keys_;  // key -> id, while the job is kept
  std::deque<std::shared_ptr<Job>> queue_;
  std::deque<std::string> finished_order_;  // ids of finished jobs, oldest first
  std::map<std::string, EvalOutcome> results_cache_;
  size_t running_ = 0;
  bool stopping_ = false, draining_ = false;
  uint64_t next_id_ = 0;
  std::string id_prefix_;
  Metrics counters_;
  std::deque<double> finish_times_;  // unix seconds of the last minute's finished evaluations
  double started_s_ = 0;
  std::vector<std::thread> workers_;
  RemoteWorkers remote_;
  std::map<int, Worker> ranks_;  // remote: by rank
  uint64_t requeued_ = 0;
};

}  // namespace leap::serve
