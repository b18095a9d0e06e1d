#include "serve/serve_worker.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "common/outcome_proto.h"
#include "evaluation/eval_pipeline.h"
#include "proto/leap.capnp.h"
#include "serve/eval_service.h"

namespace leap::serve {

namespace {

struct WorkerJob {
  std::string id, task, name, source;
  EvalConfig settings;
  std::shared_future<CompileResult> compile;
  Clock::time_point t0;
  CandidateFormat format = CandidateFormat::leap_abi;
};

// One worker rank of the service: jobs from rank 0 into a queue (compiling while queued), one
// thread per evaluator slot taking them, a heartbeat that tells rank 0 the rank is alive.
class ServeWorker {
 public:
  ServeWorker(const LeapConfig& cfg, Backend backend, const std::vector<Task>& tasks, const std::string& evald_path,
              LoopLinks& links, std::shared_ptr<spdlog::logger> log)
      : backend_(backend), links_(links), pipeline_(cfg, backend, evald_path, std::move(log)),
        device_(device_model(backend)), rank_(static_cast<uint32_t>(links.rank())) {
    for (const auto& t : tasks) by_name_[t.name] = &t;
  }

  void run() {
    std::thread heartbeat([this] { beat(); });
    std::vector<std::thread> slots;
    for (size_t k = 0; k < pipeline_.slot_count(); ++k) slots.emplace_back([this, k] { serve_slot(k); });
    receive();
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    heartbeat.join();
    for (auto& t : slots) t.join();
  }

 private:
  void send(capnp::MessageBuilder& m) {
    std::lock_guard<std::mutex> lock(send_mu_);  // ZeroMQ sockets are not thread-safe
    links_.send(0, m);
  }

  void beat() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (cv_.wait_for(lock, std::chrono::milliseconds(500), [&] { return stop_; })) return;
      }
      capnp::MallocMessageBuilder m;
      auto h = m.initRoot<proto::ServeMessage>().initHello();
      h.setRank(rank_);
      h.setEvaluators(static_cast<uint32_t>(pipeline_.slot_count()));
      h.setDevice(device_ + " (pid " + std::to_string(::getpid()) + ")");
      send(m);
    }
  }

  // Evaluator slot `k`: queued jobs until the worker stops and the queue is empty.
  void serve_slot(size_t k) {
    for (;;) {
      WorkerJob job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        ++busy_;
      }
      const EvalOutcome o = evaluate(k, job);
      capnp::MallocMessageBuilder m;
      auto d = m.initRoot<proto::ServeMessage>().initDone();
      d.setId(job.id);
      d.setRank(rank_);
      to_proto(o, d.initOutcome());
      send(m);
      std::lock_guard<std::mutex> lock(mu_);
      --busy_;
    }
  }

  EvalOutcome evaluate(size_t k, WorkerJob& job) {
    auto task = by_name_.find(job.task);
    if (task == by_name_.end())
      return failed_outcome(job.task, job.name, backend_, Status::infra_error,
                            "leap serve: worker rank " + std::to_string(rank_) + " does not serve task '" + job.task + "'");
    return pipeline_.evaluate(k, *task->second, {job.task, job.name, job.source, "request " + job.id, job.format},
                              job.compile, &job.settings, job.t0);
  }

  // Jobs until rank 0 says stop. A stop signal (mpirun forwards SIGTERM to every rank while rank 0
  // drains) ends the worker only once it has nothing to do and rank 0 has been quiet a while.
  void receive() {
    auto quiet_since = Clock::now();
    for (;;) {
      auto words = links_.inbox().receive(std::chrono::milliseconds(200));
      if (!words) {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_requested() && queue_.empty() && busy_ == 0 && micros_since(quiet_since) > 5e6) return;
        continue;
      }
      quiet_since = Clock::now();
      capnp::FlatArrayMessageReader reader(*words, capnp::ReaderOptions{1ull << 30, 64});
      auto msg = reader.getRoot<proto::ServeMessage>();
      if (msg.isStop()) return;
      if (!msg.isJob()) continue;
      auto j = msg.getJob();
      WorkerJob job{j.getId(), j.getTask(), j.getName(), j.getSource(), from_proto(j.getSettings()), {}, Clock::now()};
      job.format = j.getKernelbench() ? CandidateFormat::kernelbench : CandidateFormat::leap_abi;
      job.compile = pipeline_.farm().submit({job.name, job.source, backend_, job.format});  // compiles while queued
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(job));
      cv_.notify_all();  // the heartbeat waits on it too: notify_one could wake only that one
    }
  }

  const Backend backend_;
  LoopLinks& links_;
  EvalPipeline pipeline_;
  const std::string device_;
  const uint32_t rank_;
  std::map<std::string, const Task*> by_name_;
  std::mutex mu_, send_mu_;
  std::condition_variable cv_;
  std::deque<WorkerJob> queue_;
  size_t busy_ = 0;
  bool stop_ = false;
};

}  // namespace

void run_serve_worker(const LeapConfig& cfg, Backend backend, const std::vector<Task>& tasks,
                      const std::string& evald_path, LoopLinks& links, std::shared_ptr<spdlog::logger> log) {
  ServeWorker(cfg, backend, tasks, evald_path, links, std::move(log)).run();
}

}  // namespace leap::serve
