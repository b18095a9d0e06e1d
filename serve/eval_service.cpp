#include "serve/eval_service.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/loop_links.h"
#include "common/outcome_proto.h"
#include "proto/leap.capnp.h"

namespace leap::serve {

std::string to_string(JobState s) {
  switch (s) {
    case JobState::queued: return "queued";
    case JobState::running: return "running";
    case JobState::done: return "done";
  }
  return "unknown";
}

struct EvalService::Job {
  std::string id;
  Submission sub;
  std::shared_future<CompileResult> compile;
  JobState state = JobState::queued;
  EvalOutcome outcome;
  bool cached = false;
  double submitted_s = 0, started_s = 0, finished_s = 0;
  Clock::time_point t0;
  std::string cache_key;
  int attempts = 0;  // remote: dispatches to a worker
  int rank = -1;     // remote: the worker evaluating it
};

struct EvalService::Worker {
  size_t capacity = 0;  // its judges
  std::set<std::string> in_flight;
  double last_seen_s = 0;
  bool alive = false, lost = false;
  std::string device;
};

EvalService::EvalService(const LeapConfig& cfg, Backend backend, std::vector<Task> tasks,
                         const std::string& evald_path, std::shared_ptr<spdlog::logger> log, RemoteWorkers remote)
    : cfg_(cfg), backend_(backend), tasks_(std::move(tasks)), log_(std::move(log)), device_model_(leap::device_model(backend)),
      remote_(remote) {
  for (const auto& t : tasks_) by_name_[t.name] = &t;
  if (!remote_.links) pipeline_ = std::make_unique<EvalPipeline>(cfg_, backend_, evald_path, log_);
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  id_prefix_ = buf;
  started_s_ = unix_seconds();
  counters_.latency_buckets_s = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  counters_.latency_counts.assign(counters_.latency_buckets_s.size() + 1, 0);
  if (remote_.links) {
    workers_.emplace_back(&EvalService::dispatch, this);
    workers_.emplace_back(&EvalService::receive, this);
    return;
  }
  for (size_t k = 0; k < pipeline_->slot_count(); ++k) workers_.emplace_back(&EvalService::work, this, k);
}

EvalService::~EvalService() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
  if (remote_.links)
    for (const auto& [rank, w] : ranks_) {
      if (!w.alive) continue;
      capnp::MallocMessageBuilder m;
      m.initRoot<proto::ServeMessage>().initStop().setReason("leap serve stops");
      remote_.links->send(rank, m);
    }
}

const Task* EvalService::task(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::string EvalService::cache_key(const Submission& s) const {
  return content_hash({s.task, leap::to_string(backend_), device_model_, s.settings_key, s.source});
}

size_t EvalService::free_slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t limit = static_cast<size_t>(cfg_.serve.queue_limit);
  return queue_.size() >= limit ? 0 : limit - queue_.size();
}

SubmitResult EvalService::submit(Submission s) {
  auto job = std::make_shared<Job>();
  job->submitted_s = unix_seconds();
  job->t0 = Clock::now();
  job->cache_key = cache_key(s);
  std::unique_lock<std::mutex> lock(mu_);
  if (!s.idempotency_key.empty()) {
    if (auto k = idempotency_keys_.find(s.idempotency_key); k != idempotency_keys_.end()) {
      auto earlier = jobs_.find(k->second);
      if (earlier != jobs_.end()) {
        if (earlier->second->cache_key != job->cache_key || earlier->second->sub.name != s.name)
          return {SubmitResult::Kind::key_reused, k->second};
        return {SubmitResult::Kind::accepted, k->second, true};
      }
    }
  }
  if (draining_ || stopping_) return {SubmitResult::Kind::draining, ""};
  auto cached = cfg_.serve.cache ? results_cache_.find(job->cache_key) : results_cache_.end();
  if (cached == results_cache_.end() && queue_.size() >= static_cast<size_t>(cfg_.serve.queue_limit)) {
    ++counters_.rejected_full;
    return {SubmitResult::Kind::queue_full, ""};
  }
  job->id = "ev-" + id_prefix_ + "-" + std::to_string(++next_id_);
  ++counters_.submitted;
  if (!s.client_id.empty()) client_ids_[s.client_id] = job->id;
  if (!s.idempotency_key.empty()) idempotency_keys_[s.idempotency_key] = job->id;
  job->sub = std::move(s);
  jobs_[job->id] = job;
  if (cached != results_cache_.end()) {
    job->outcome = cached->second;
    job->outcome.candidate = job->sub.name;
    job->cached = true;
    job->started_s = job->submitted_s;
    ++counters_.results_cache_hits;
    finish(*job);
    return {SubmitResult::Kind::accepted, job->id};
  }
  if (pipeline_) {
    lock.unlock();
    // Compiling starts now, while the job waits for a judge.
    auto compile = pipeline_->farm().submit({job->sub.name, job->sub.source, backend_, job->sub.format});
    lock.lock();
    job->compile = compile;
  }
  queue_.push_back(job);
  work_cv_.notify_one();
  return {SubmitResult::Kind::accepted, job->id};
}

void EvalService::work(size_t slot) {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      job = queue_.front();
      queue_.pop_front();
      job->state = JobState::running;
      job->started_s = unix_seconds();
      ++running_;
    }
    CandidateSource c{job->sub.task, job->sub.name, job->sub.source, "request " + job->id, job->sub.format};
    EvalOutcome o;
    try {
      o = pipeline_->evaluate(slot, *by_name_.at(job->sub.task), c, job->compile, &job->sub.settings, job->t0);
    } catch (const std::exception& e) {  // leap's own failure: never the candidate's
      o = failed_outcome(job->sub.task, job->sub.name, backend_, Status::infra_error,
                         std::string("leap serve: ") + e.what());
    }
    std::lock_guard<std::mutex> lock(mu_);
    complete(*job, std::move(o));
  }
}

void EvalService::complete(Job& j, EvalOutcome o) {
  --running_;
  j.outcome = std::move(o);
  ++counters_.compiled;
  counters_.compile_cache_hits += j.outcome.cache_hit;
  if (cfg_.serve.cache && j.outcome.status != Status::infra_error) results_cache_[j.cache_key] = j.outcome;
  finish(j);
}

void EvalService::finish(Job& j) {
  j.state = JobState::done;
  j.finished_s = unix_seconds();
  ++counters_.by_status[leap::to_string(j.outcome.status)];
  const double latency = j.finished_s - j.submitted_s;
  counters_.latency_sum_s += latency;
  ++counters_.latency_count;
  for (size_t b = 0; b < counters_.latency_buckets_s.size(); ++b)
    if (latency <= counters_.latency_buckets_s[b]) ++counters_.latency_counts[b];
  ++counters_.latency_counts.back();
  if (!j.cached) finish_times_.push_back(j.finished_s);
  while (!finish_times_.empty() && finish_times_.front() < j.finished_s - 60) finish_times_.pop_front();
  finished_order_.push_back(j.id);
  while (finished_order_.size() > static_cast<size_t>(cfg_.serve.results_kept)) {
    auto old = jobs_.find(finished_order_.front());
    if (old != jobs_.end()) {
      // Only while the name still points here: a newer job may have taken it over.
      auto forget = [&](std::map<std::string, std::string>& names, const std::string& name) {
        if (auto n = names.find(name); n != names.end() && n->second == old->first) names.erase(n);
      };
      forget(client_ids_, old->second->sub.client_id);
      forget(idempotency_keys_, old->second->sub.idempotency_key);
      jobs_.erase(old);
    }
    finished_order_.pop_front();
  }
  if (results_cache_.size() > static_cast<size_t>(cfg_.serve.results_kept)) results_cache_.clear();  // bounded memory
  done_cv_.notify_all();
}

JobView EvalService::view(const Job& j) const {
  JobView v;
  v.id = j.id;
  v.client_id = j.sub.client_id;
  v.task = j.sub.task;
  v.name = j.sub.name;
  v.state = j.state;
  v.cached = j.cached;
  v.submitted_s = j.submitted_s;
  v.started_s = j.started_s;
  v.finished_s = j.finished_s;
  if (j.state == JobState::done) v.outcome = j.outcome;
  if (j.state == JobState::queued)
    for (const auto& q : queue_) {
      if (q.get() == &j) break;
      ++v.queue_position;
    }
  return v;
}

std::optional<JobView> EvalService::get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return view(*it->second);
}

std::optional<JobView> EvalService::wait(const std::string& id, double timeout_s) const {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  auto job = it->second;
  done_cv_.wait_until(lock, after_seconds(timeout_s), [&] { return job->state == JobState::done; });
  return view(*job);
}

std::vector<EvalOutcome> EvalService::evaluate_all(std::vector<Submission> subs, double timeout_s) {
  std::vector<std::string> ids;
  for (auto& sub : subs) {
    for (;;) {
      auto r = submit(sub);
      if (r.kind == SubmitResult::Kind::accepted) {
        ids.push_back(r.id);
        break;
      }
      if (r.kind == SubmitResult::Kind::draining) throw LeapError("the evaluation service is stopping");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // queue full: the judges catch up
    }
  }
  std::vector<EvalOutcome> out;
  for (const auto& id : ids) {
    auto v = wait(id, timeout_s);
    if (!v || v->state != JobState::done) throw LeapError("evaluation " + id + " did not finish");
    out.push_back(v->outcome);
  }
  return out;
}

std::optional<JobView> EvalService::wait_any(const std::vector<std::string>& ids, double timeout_s) const {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Job>> watched;
  for (const auto& id : ids)
    if (auto it = jobs_.find(id); it != jobs_.end()) watched.push_back(it->second);
  std::shared_ptr<Job> done;
  done_cv_.wait_until(lock, after_seconds(timeout_s), [&] {
    for (const auto& j : watched)
      if (j->state == JobState::done) {
        done = j;
        return true;
      }
    return false;
  });
  if (!done) return std::nullopt;
  return view(*done);
}

std::string EvalService::id_of_client(const std::string& client_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = client_ids_.find(client_id);
  return it == client_ids_.end() ? "" : it->second;
}

Metrics EvalService::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  Metrics m = counters_;
  m.queue_depth = queue_.size();
  m.in_flight = running_;
  m.evaluators = pipeline_ ? pipeline_->slot_count() : 0;
  for (const auto& [rank, w] : ranks_) {
    if (w.alive) m.evaluators += w.capacity;
    m.workers_alive += w.alive;
    m.workers_lost += w.lost;
  }
  m.requeued = requeued_;
  const double now = unix_seconds();
  size_t recent = 0;
  for (double t : finish_times_) recent += t >= now - 60;
  m.uptime_s = now - started_s_;
  m.evaluations_per_s_60 = recent / std::max(1.0, std::min(60.0, m.uptime_s));
  return m;
}

nlohmann::json EvalService::workers_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [rank, w] : ranks_)
    out.push_back({{"rank", rank}, {"alive", w.alive}, {"lost", w.lost}, {"judges", w.capacity},
                   {"in_flight", w.in_flight.size()}, {"device", w.device}});
  return out;
}

bool EvalService::drain(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  draining_ = true;
  return done_cv_.wait_until(lock, after_seconds(timeout_s), [&] { return queue_.empty() && running_ == 0; });
}

void EvalService::dispatch() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    Worker* target = nullptr;
    int target_rank = -1;
    work_cv_.wait(lock, [&] {
      if (stopping_) return true;
      if (queue_.empty()) return false;
      double best = 1e18;
      for (auto& [rank, w] : ranks_) {
        if (!w.alive || w.in_flight.size() >= w.capacity) continue;
        double load = static_cast<double>(w.in_flight.size()) / static_cast<double>(w.capacity);
        if (load < best) best = load, target = &w, target_rank = rank;
      }
      return target != nullptr;
    });
    if (stopping_) return;
    auto job = queue_.front();
    queue_.pop_front();
    job->state = JobState::running;
    job->started_s = unix_seconds();
    job->rank = target_rank;
    ++job->attempts;
    ++running_;
    target->in_flight.insert(job->id);
    capnp::MallocMessageBuilder m;
    auto j = m.initRoot<proto::ServeMessage>().initJob();
    j.setId(job->id);
    j.setTask(job->sub.task);
    j.setName(job->sub.name);
    j.setSource(job->sub.source);
    j.setKernelbench(job->sub.format == CandidateFormat::kernelbench);
    to_proto(job->sub.settings, j.initSettings());
    lock.unlock();
    remote_.links->send(target_rank, m);  // ZeroMQ queues it; a dead peer is found by its silence
    lock.lock();
  }
}

void EvalService::receive() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    auto words = remote_.links->inbox().receive(std::chrono::milliseconds(100));
    std::lock_guard<std::mutex> lock(mu_);
    const double now = unix_seconds();
    if (words) {
      capnp::FlatArrayMessageReader reader(*words, capnp::ReaderOptions{1ull << 30, 64});
      auto msg = reader.getRoot<proto::ServeMessage>();
      if (msg.isHello()) {
        auto h = msg.getHello();
        auto& w = ranks_[static_cast<int>(h.getRank())];
        if (!w.lost) {  // a worker declared dead stays so: its jobs went elsewhere
          if (!w.alive) log_->info("worker rank {} ready: {} judge(s), {}", h.getRank(), h.getEvaluators(), h.getDevice().cStr());
          w.alive = true;
          w.capacity = std::max<size_t>(1, h.getEvaluators());
          w.device = h.getDevice();
          w.last_seen_s = now;
          work_cv_.notify_all();
        }
      } else if (msg.isDone()) {
        auto d = msg.getDone();
        const int rank = static_cast<int>(d.getRank());
        auto it = jobs_.find(d.getId());
        auto& w = ranks_[rank];
        w.last_seen_s = now;
        w.in_flight.erase(d.getId());
        // Only the worker the job is with now answers it (a late answer of a lost worker is dropped).
        if (it != jobs_.end() && it->second->state == JobState::running && it->second->rank == rank) {
          complete(*it->second, from_proto(d.getOutcome()));
        }
        work_cv_.notify_all();
      }
    }
    for (auto& [rank, w] : ranks_) {
      if (!w.alive || now - w.last_seen_s <= remote_.worker_timeout_s) continue;
      w.alive = false;
      w.lost = true;
      log_->warn("worker rank {} silent for {:.1f} s: lost; {} evaluation(s) re-queued", rank, now - w.last_seen_s,
                 w.in_flight.size());
      for (const auto& id : w.in_flight) {
        auto it = jobs_.find(id);
        if (it == jobs_.end() || it->second->state != JobState::running) continue;
        auto& job = *it->second;
        --running_;
        if (job.attempts < 2) {  // once more, on another worker
          job.state = JobState::queued;
          job.rank = -1;
          ++requeued_;
          queue_.push_front(it->second);
        } else {
          job.outcome = failed_outcome(job.sub.task, job.sub.name, backend_, Status::infra_error,
                                       "leap serve: the worker ranks evaluating this candidate died twice (" +
                                           std::to_string(rank) + " last); not the candidate's fault");
          finish(job);
        }
      }
      w.in_flight.clear();
      work_cv_.notify_all();
    }
  }
}

}  // namespace leap::serve
