#include "evaluation/eval_pipeline.h"

#include <condition_variable>

#include "common/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "common/backend.h"
#include "common/clock.h"
#include "common/error.h"

namespace leap {

EvalPipeline::EvalPipeline(const LeapConfig& cfg, Backend backend, const std::string& evald_path,
                           std::shared_ptr<spdlog::logger> log)
    : cfg_(cfg), backend_(backend), log_(std::move(log)), farm_(cfg.compile, make_driver(cfg.compile, backend)) {
  const int n = cfg.sandbox.evaluators;
  const auto devices = backend == Backend::cuda
                           ? evaluator_gpus(n, cfg.sandbox.gpus, static_cast<int>(visible_gpus().size()))
                           : std::vector<int>{};
  const int gpus = devices.empty() ? n : *std::max_element(devices.begin(), devices.end()) + 1;
  SandboxConfig sandbox = cfg.sandbox;
  sandbox.runner_spares = runner_spares(cfg.sandbox, backend == Backend::cuda, n, gpus);  // each judge is told
  for (int i = 0; i < n; ++i)
    slots_.push_back(std::make_unique<EvaluatorSlot>(evald_path, backend, sandbox, cfg.eval, log_,
                                                     backend == Backend::cuda ? devices[i] : i));
}

std::vector<int> evaluator_gpus(int evaluators, int gpus, int visible) {
  // gpus = 0: every GPU this process sees (more judges than GPUs share them); an explicit count
  // beyond what is visible is refused here rather than left to fail in every judge's start.
  if (gpus > 0 && visible > 0 && gpus > visible)
    throw LeapError(fmt::format("[sandbox] gpus = {}, but this process sees {} GPU(s)", gpus, visible));
  const int spread = gpus > 0 ? gpus : visible > 0 ? std::min(evaluators, visible) : evaluators;
  std::vector<int> out;
  for (int i = 0; i < evaluators; ++i) out.push_back(i % spread);
  return out;
}

double EvalPipeline::await_evaluators() {
  const auto t0 = Clock::now();
  for (size_t i = 0; i < slots_.size(); ++i)
    if (std::string why; !slots_[i]->ready(&why)) throw LeapError(fmt::format("judge {}: {}", i, why));
  return micros_since(t0) / 1e6;
}

int EvalPipeline::evaluator_restarts() const {
  int n = 0;
  for (const auto& s : slots_) n += s->restarts();
  return n;
}

namespace {

EvalOutcome failed(const CandidateSource& c, Backend backend, Status status, std::string feedback) {
  return failed_outcome(c.task, c.name, backend, status, std::move(feedback));
}

}  // namespace

EvalOutcome EvalPipeline::evaluate_one(EvaluatorSlot& slot, const CandidateSource& c, const Task* task, size_t i,
                                       std::shared_future<CompileResult>& compile, CompileResult& cr,
                                       const EvalConfig* settings) {
  EvalOutcome o;
  const int attempts = 1 + cfg_.sandbox.infra_retries;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    try {
      cr = attempt == 0 ? compile.get() : farm_.compile({c.name, c.source, backend_, c.format});
    } catch (const std::exception& e) {  // our fault (disk, cache), never the candidate's
      o = failed(c, backend_, Status::infra_error, std::string("compile farm: ") + e.what());
      continue;
    }
    if (!cr.ok) return failed(c, backend_, Status::compile_error, cr.diagnostics);
    EvalJob job{i, task, c.name, cr.library_path, nullptr, settings, c.format};
    TimingStats known;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = reference_timings_.find(c.task); it != reference_timings_.end()) {
        known = it->second;
        job.reference_timing = &known;
      }
    }
    const double eval_start_s = unix_seconds();
    try {
      o = slot.evaluate(job);
    } catch (const std::exception& e) {
      o = failed(c, backend_, Status::infra_error, std::string("evaluator: ") + e.what());
    }
    o.stages.eval_start_s = eval_start_s;
    o.stages.eval_end_s = unix_seconds();
    if (o.status != Status::infra_error) return o;
    log_->warn("{}: infrastructure error (attempt {} of {}): {}", c.name, attempt + 1, attempts, o.feedback);
  }
  o.feedback += " (after " + std::to_string(attempts) + " attempts)";
  return o;
}

EvalOutcome EvalPipeline::evaluate(size_t slot, const Task& task, const CandidateSource& c,
                                   std::shared_future<CompileResult> compile, const EvalConfig* settings,
                                   Clock::time_point t0) {
  CompileResult cr;
  EvalOutcome o = evaluate_one(*slots_.at(slot), c, &task, 0, compile, cr, settings);
  o.feedback = clean_text(o.feedback, (settings ? *settings : cfg_.eval).max_feedback_bytes);
  o.cache_hit = cr.cache_hit;
  o.compiler = cr.compiler;
  if (cr.compiler.find("nvcc") != std::string::npos) o.nvrtc_fallback = cr.nvrtc_fallback;
  o.stages.queue_wait_us = cr.queue_wait_us;
  o.stages.compile_us = cr.compile_us;
  o.stages.compile_start_s = cr.start_s;
  o.stages.compile_end_s = cr.end_s;
  o.stages.compile_host_us = cr.host_pass_us;
  o.stages.compile_device_us = cr.device_pass_us;
  o.stages.total_us = micros_since(t0);
  if (o.status == Status::ok && o.reference_timing.samples > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    reference_timings_.emplace(c.task, o.reference_timing);
  }
  return o;
}

std::shared_future<CompileResult> EvalPipeline::submit_compile(const CandidateSource& c) {
  return farm_.submit({c.name, c.source, backend_, c.format});
}

std::vector<EvalOutcome> EvalPipeline::run(const std::vector<Task>& tasks, const std::vector<CandidateSource>& cands,
                                           const Sink& sink, std::vector<std::shared_future<CompileResult>> compiles,
                                           const std::function<void()>& tick) {
  check_candidate_tasks(cands, tasks);
  std::map<std::string, const Task*> by_name;
  for (const auto& t : tasks) by_name[t.name] = &t;

  auto t0 = Clock::now();
  if (compiles.empty()) {
    for (const auto& c : cands) compiles.push_back(submit_compile(c));
  } else if (compiles.size() != cands.size()) {
    throw LeapError("eval pipeline: " + std::to_string(compiles.size()) + " compiles for " + std::to_string(cands.size()) +
                    " candidates");
  }

  std::vector<EvalOutcome> outcomes(cands.size());
  // The first candidate (in order) whose compile has finished, else the first one: a judge never
  // idles behind a long build while later candidates (cache hits, compile errors, sources without
  // a build) are ready. Outcomes keep candidate order.
  std::mutex claim_mu;
  std::vector<bool> claimed(cands.size(), false);
  size_t first_open = 0;
  auto claim = [&]() -> size_t {
    for (;;) {
      std::unique_lock<std::mutex> lock(claim_mu);
      while (first_open < cands.size() && claimed[first_open]) ++first_open;
      if (first_open == cands.size()) return cands.size();
      for (size_t i = first_open; i < (in_order_ ? first_open + 1 : cands.size()); ++i)
        if (!claimed[i] && compiles[i].wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
          claimed[i] = true;
          return i;
        }
      const size_t head = first_open;
      lock.unlock();
      if (compiles[head].wait_for(std::chrono::milliseconds(20)) == std::future_status::ready) {
        lock.lock();
        if (!claimed[head]) {
          claimed[head] = true;
          return head;
        }
      }
    }
  };
  std::mutex mu;  // the sink and the tick
  std::condition_variable ended;
  size_t running = slots_.size();
  auto work = [&](size_t slot) {
    for (size_t i; (i = claim()) < cands.size();) {
      EvalOutcome o = evaluate(slot, *by_name.at(cands[i].task), cands[i], compiles[i], nullptr, t0);
      o.id = i;
      std::lock_guard<std::mutex> lock(mu);
      outcomes[i] = o;
      if (sink) sink(o);
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    ended.notify_all();
  };
  std::vector<std::thread> threads;
  for (size_t k = 0; k < slots_.size(); ++k) threads.emplace_back(work, k);
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0)
      if (!ended.wait_for(lock, std::chrono::milliseconds(250), [&] { return running == 0; }) && tick) tick();
  }
  for (auto& t : threads) t.join();
  return outcomes;
}

}  // namespace leap
