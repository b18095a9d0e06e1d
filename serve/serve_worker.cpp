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

}  // namespace

void run_serve_worker(const LeapConfig& cfg, Backend backend, const std::vector<Task>& tasks,
                      const std::string& evald_path, LoopLinks& links, std::shared_ptr<spdlog::logger> log) {
  std::map<std::string, const Task*> by_name;
  for (const auto& t : tasks) by_name[t.name] = &t;
  EvalPipeline pipeline(cfg, backend, evald_path, log);
  const std::string device = device_model(backend);
  const uint32_t rank = static_cast<uint32_t>(links.rank());

  std::mutex mu, send_mu;
  std::condition_variable cv;
  std::deque<WorkerJob> queue;
  size_t busy = 0;
  bool stop = false;
  auto send = [&](capnp::MessageBuilder& m) {
    std::lock_guard<std::mutex> lock(send_mu);  // ZeroMQ sockets are not thread-safe
    links.send(0, m);
  };

  std::thread heartbeat([&] {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        if (cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return stop; })) return;
      }
      capnp::MallocMessageBuilder m;
      auto h = m.initRoot<proto::ServeMessage>().initHello();
      h.setRank(rank);
      h.setEvaluators(static_cast<uint32_t>(pipeline.slot_count()));
      h.setDevice(device + " (pid " + std::to_string(::getpid()) + ")");
      send(m);
    }
  });
  std::vector<std::thread> slots;
  for (size_t k = 0; k < pipeline.slot_count(); ++k)
    slots.emplace_back([&, k] {
      for (;;) {
        WorkerJob job;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return stop || !queue.empty(); });
          if (queue.empty()) return;
          job = std::move(queue.front());
          queue.pop_front();
          ++busy;
        }
        EvalOutcome o;
        auto task = by_name.find(job.task);
        if (task == by_name.end()) {
          o = failed_outcome(job.task, job.name, backend, Status::infra_error,
                             "leap serve: worker rank " + std::to_string(rank) + " does not serve task '" + job.task + "'");
        } else {
          o = pipeline.evaluate(k, *task->second, {job.task, job.name, job.source, "request " + job.id, job.format}, job.compile,
                                &job.settings, job.t0);
        }
        capnp::MallocMessageBuilder m;
        auto d = m.initRoot<proto::ServeMessage>().initDone();
        d.setId(job.id);
        d.setRank(rank);
        to_proto(o, d.initOutcome());
        send(m);
        std::lock_guard<std::mutex> lock(mu);
        --busy;
      }
    });

  // Jobs until rank 0 says stop. A stop signal (mpirun forwards SIGTERM to every rank while rank 0
  // drains) ends the worker only once it has nothing to do and rank 0 has been quiet a while.
  auto quiet_since = Clock::now();
  for (;;) {
    auto words = links.inbox().receive(std::chrono::milliseconds(200));
    if (!words) {
      std::lock_guard<std::mutex> lock(mu);
      if (stop_requested() && queue.empty() && busy == 0 && micros_since(quiet_since) > 5e6) break;
      continue;
    }
    quiet_since = Clock::now();
    capnp::FlatArrayMessageReader reader(*words, capnp::ReaderOptions{1ull << 30, 64});
    auto msg = reader.getRoot<proto::ServeMessage>();
    if (msg.isStop()) break;
    if (!msg.isJob()) continue;
    auto j = msg.getJob();
    WorkerJob job{j.getId(), j.getTask(), j.getName(), j.getSource(), from_proto(j.getSettings()), {}, Clock::now()};
    job.format = j.getKernelbench() ? CandidateFormat::kernelbench : CandidateFormat::leap_abi;
    job.compile = pipeline.farm().submit({job.name, job.source, backend, job.format});  // compiles while queued
    std::lock_guard<std::mutex> lock(mu);
    queue.push_back(std::move(job));
    cv.notify_all();  // the heartbeat waits on it too: notify_one could wake only that one
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  heartbeat.join();
  for (auto& t : slots) t.join();
}

}  // namespace leap::serve
