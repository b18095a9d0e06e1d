#include "worker/worker_role.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <map>

#include "common/capnp_util.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/outcome_proto.h"
#include "proto/leap.capnp.h"

namespace leap {
namespace {

constexpr int kCoordinator = 0, kLearner = 1;

}  // namespace

struct WorkerRole::Pending {
  uint32_t step = 0, rollout = 0, turn = 0;
  uint64_t group = 0;
  Generation gen;
  uint32_t memory_chars = 0;
};

WorkerRole::WorkerRole(LoopLinks& links, WeightChannel& weights, Policy& policy, EvalPipeline& pipeline,
                       std::vector<Task> tasks, Backend backend, std::shared_ptr<spdlog::logger> log,
                       bool memory_prompts)
    : links_(links), weights_(weights), policy_(policy), pipeline_(pipeline), tasks_(std::move(tasks)),
      backend_(backend), log_(std::move(log)), memory_prompts_(memory_prompts) {}

std::optional<kj::Array<capnp::word>> WorkerRole::next_message(std::chrono::milliseconds wait) {
  if (!held_.empty()) {
    auto m = std::move(held_.front());
    held_.pop_front();
    return m;
  }
  return links_.inbox().receive(wait);
}

void WorkerRole::ask_memory(std::vector<GenerateRequest>& requests, const std::vector<std::array<uint64_t, 4>>& keys) {
  // One query for the whole turn: the learner answers every rollout's context in one message.
  capnp::MallocMessageBuilder m;
  auto q = m.initRoot<proto::LoopMessage>().initMemoryQuery();
  const uint64_t id = next_query_++;
  q.setId(id);
  q.setWorker(static_cast<uint32_t>(links_.rank()));
  q.setStep(static_cast<uint32_t>(keys.at(0)[0]));
  auto items = q.initRollouts(static_cast<unsigned>(requests.size()));
  for (unsigned i = 0; i < requests.size(); ++i) {
    items[i].setGroup(keys[i][1]);
    items[i].setRollout(static_cast<uint32_t>(keys[i][2]));
    items[i].setTurn(static_cast<uint32_t>(keys[i][3]));
    items[i].setTask(requests[i].task->name);
  }
  links_.send(kLearner, m);
  // The answer; anything else that arrives meanwhile waits its turn in held_. A learner that does
  // not answer in time costs the context, not the rollouts.
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < until && !stop_requested()) {
    auto words = links_.inbox().receive(std::chrono::milliseconds(100));
    if (!words) continue;
    capnp::FlatArrayMessageReader reader(*words);
    auto msg = reader.getRoot<proto::LoopMessage>();
    if (msg.isSync()) {  // new weights before this batch is generated (between batches)
      sync(msg.getSync().getWeightsVersion());
      continue;
    }
    if (!msg.isMemoryContext()) {
      const bool stop = msg.isStop();
      held_.push_back(std::move(*words));
      if (stop) break;  // the run ends: no answer is coming
      continue;
    }
    if (msg.getMemoryContext().getId() != id) continue;  // the answer to a query given up on
    auto contexts = msg.getMemoryContext().getContexts();
    for (unsigned i = 0; i < contexts.size() && i < requests.size(); ++i) requests[i].ctx.memory = contexts[i].getText();
    return;
  }
  log_->warn("the memory query for {} rollouts went unanswered for 60 s: those prompts go without context", requests.size());
}

void WorkerRole::sync(uint64_t version) {
  auto t0 = Clock::now();
  const WeightSync ws = broadcast_policy_weights(policy_, weights_, false);
  version_ = version;
  version_known_ = true;
  capnp::MallocMessageBuilder m;
  auto sd = m.initRoot<proto::LoopMessage>().initSynced();
  sd.setRank(static_cast<uint32_t>(links_.rank()));
  sd.setWeightsVersion(version);
  sd.setChecksum(ws.checksum);
  sd.setBroadcastS(micros_since(t0) / 1e6);
  links_.send(kCoordinator, m);
  log_->info("weights version {} checksum {}", version, ws.checksum);
}

// One batch of assignments as it moves through this worker: read, generated, compiled, judged.
struct WorkerRole::Turn {
  std::vector<Pending> asked;            // rollouts to generate, beside their requests and names
  std::vector<GenerateRequest> requests;
  std::vector<std::string> names;
  std::vector<std::array<uint64_t, 4>> keys;  // step, group, rollout, turn
  std::vector<Pending> pending;          // generated, compiling or being judged (index = candidate id)
  std::vector<CandidateSource> candidates;
  std::vector<std::shared_future<CompileResult>> started;  // one per candidate
  // Not compiled: our fault (infra_error) or the policy's answer without code (compile_error); never dropped.
  std::vector<std::pair<Pending, EvalOutcome>> failed;
  uint32_t step = 0;  // of its assignments
  uint32_t generated = 0, evaluated = 0;
  Clock::time_point last_progress = Clock::now();
  double generate_s = 0, gen_start_s = 0, gen_end_s = 0;

  void infra(Pending p, const std::string& task, const std::string& name, const std::string& why, Backend backend) {
    EvalOutcome o = failed_outcome(task, name, backend, Status::infra_error, "generation failed: " + why);
    failed.emplace_back(std::move(p), std::move(o));
  }
};

void WorkerRole::process(std::vector<kj::Array<capnp::word>>& batch) {
  Turn t;
  auto t_gen = Clock::now();
  read_assignments(batch, t);
  if (memory_prompts_ && !t.requests.empty()) ask_memory(t.requests, t.keys);
  generate(t);
  t.generate_s = micros_since(t_gen) / 1e6;
  t.gen_end_s = unix_seconds();
  t.gen_start_s = t.gen_end_s - t.generate_s;
  for (const auto& [p, o] : t.failed) send_result(t, p, o);
  evaluate(t);
}

// Every rollout of the turn first, then generate_batch over them (a language model decodes a
// batch together; each result is what it would be alone).
void WorkerRole::read_assignments(std::vector<kj::Array<capnp::word>>& batch, Turn& t) {
  std::map<std::string, const Task*> by_name;
  for (const auto& task : tasks_) by_name[task.name] = &task;
  for (auto& words : batch) {
    capnp::FlatArrayMessageReader reader(words);
    auto a = reader.getRoot<proto::LoopMessage>().getAssignment();
    t.step = a.getStep();
    // Until its first sync a worker holds the run's starting weights, the version the first step
    // was opened with (a resumed run's checkpoint).
    if (!version_known_) version_ = a.getWeightsVersion(), version_known_ = true;
    const Task* task = by_name.count(a.getTask()) ? by_name.at(a.getTask()) : nullptr;
    for (auto rw : a.getRollouts()) {
      Pending p{a.getStep(), rw.getRollout(), a.getTurn(), a.getGroup(), {}};
      PolicyContext ctx;
      ctx.turn = static_cast<int>(a.getTurn());
      if (rw.getHasPrior()) {
        auto pr = rw.getPrior();
        ctx.prev_actions = to_vector<int32_t>(pr.getActions());
        ctx.prev_status = from_proto(pr.getStatus());
        ctx.prev_check = from_proto(pr.getCheck());
        ctx.prev_feedback = pr.getFeedback();
      }
      std::string name = fmt::format("{}.g{}.r{}.t{}", a.getTask().cStr(), p.group, p.rollout, p.turn);
      if (!task) {
        t.infra(std::move(p), a.getTask(), name, std::string("task ") + a.getTask().cStr() + " is not in this worker's suite",
                backend_);
        continue;
      }
      t.requests.push_back({task, backend_, std::move(ctx), rw.getSeed()});
      t.keys.push_back({p.step, p.group, p.rollout, p.turn});
      t.asked.push_back(std::move(p));
      t.names.push_back(std::move(name));
    }
  }
}

// The coordinator stops a run whose worker holds work and stays silent ([run] worker_timeout_s):
// a batch that takes long (a large model's generation, slow candidates) says it is moving.
void WorkerRole::report_progress(Turn& t) {
  if (micros_since(t.last_progress) < 5e5) return;
  t.last_progress = Clock::now();
  capnp::MallocMessageBuilder m;
  auto wp = m.initRoot<proto::LoopMessage>().initProgress();
  wp.setWorker(static_cast<uint32_t>(links_.rank()));
  wp.setGenerated(t.generated);
  wp.setEvaluated(t.evaluated);
  links_.send(kCoordinator, m);
}

// In batches of what the policy decodes together; a batch's compiles start while the next batch
// is generated (compiling is CPU work beside the decoding; nothing is timed meanwhile:
// evaluation starts once the whole turn is written).
void WorkerRole::generate(Turn& t) {
  const size_t chunk = policy_.batch_size() ? policy_.batch_size() : std::max<size_t>(1, t.requests.size());
  for (size_t b = 0; b < t.requests.size(); b += chunk) {
    const size_t e = std::min(t.requests.size(), b + chunk);
    const std::vector<GenerateRequest> part(t.requests.begin() + static_cast<long>(b),
                                            t.requests.begin() + static_cast<long>(e));
    std::vector<Generation> gens;
    std::vector<std::string> errors(part.size());
    try {
      gens = policy_.generate_batch(part);
    } catch (const std::exception&) {  // one at a time, so that one bad request fails alone
      gens.assign(part.size(), Generation{});
      for (size_t i = 0; i < part.size(); ++i) {
        try {
          gens[i] = policy_.generate(*part[i].task, part[i].backend, part[i].ctx, part[i].seed);
        } catch (const std::exception& ex) {
          errors[i] = ex.what();
        }
      }
    }
    for (size_t i = 0; i < part.size(); ++i) {
      Pending p = std::move(t.asked[b + i]);
      const Task* task = part[i].task;
      if (!errors[i].empty()) {
        t.infra(std::move(p), task->name, t.names[b + i], errors[i], backend_);
        continue;
      }
      p.gen = std::move(gens[i]);
      p.memory_chars = static_cast<uint32_t>(part[i].ctx.memory.size());
      if (!p.gen.error.empty()) {  // the policy's own failure (no code in its answer): its outcome
        EvalOutcome o = failed_outcome(task->name, t.names[b + i], backend_, Status::compile_error, p.gen.error);
        t.failed.emplace_back(std::move(p), std::move(o));
        continue;
      }
      t.candidates.push_back({task->name, t.names[b + i], p.gen.source, "policy"});
      t.started.push_back(pipeline_.submit_compile(t.candidates.back()));
      t.pending.push_back(std::move(p));
    }
    t.generated += static_cast<uint32_t>(part.size());
    report_progress(t);
  }
}

void WorkerRole::send_result(const Turn& t, const Pending& p, const EvalOutcome& o) {
  capnp::MallocMessageBuilder m;
  auto r = m.initRoot<proto::LoopMessage>().initResult();
  r.setStep(p.step);
  r.setGroup(p.group);
  r.setRollout(p.rollout);
  r.setTurn(p.turn);
  r.setWorker(static_cast<uint32_t>(links_.rank()));
  r.setWeightsVersion(version_);
  auto g = r.initGeneration();
  auto ctx = g.initContext(static_cast<unsigned>(p.gen.context.size()));
  for (unsigned i = 0; i < p.gen.context.size(); ++i) ctx.set(i, p.gen.context[i]);
  auto act = g.initActions(static_cast<unsigned>(p.gen.actions.size()));
  for (unsigned i = 0; i < p.gen.actions.size(); ++i) act.set(i, p.gen.actions[i]);
  g.setLogprob(p.gen.logprob);
  g.setSummary(p.gen.summary);
  g.setDecision(p.gen.decision);
  g.setStartS(t.gen_start_s);
  g.setEndS(t.gen_end_s);
  g.setMemoryChars(p.memory_chars);
  auto tl = g.initTokenLogprobs(static_cast<unsigned>(p.gen.token_logprobs.size()));
  for (unsigned i = 0; i < p.gen.token_logprobs.size(); ++i) tl.set(i, p.gen.token_logprobs[i]);
  to_proto(o, r.initOutcome());
  r.setSource(p.gen.source);
  links_.send(kLearner, m);
}

// The turn's candidates through the judges (each result sent as it comes), then the batch's
// account to the coordinator.
void WorkerRole::evaluate(Turn& t) {
  double evaluate_s = 0, compile_cpu_s = 0;
  uint32_t hits = 0, compiles = 0;
  auto t_run = Clock::now();
  pipeline_.run(
      tasks_, t.candidates,
      [&](const EvalOutcome& o) {
        send_result(t, t.pending.at(o.id), o);
        ++t.evaluated;
        report_progress(t);
        evaluate_s += o.stages.eval_us / 1e6;
        if (o.cache_hit) ++hits;
        else compile_cpu_s += o.stages.compile_us / 1e6;
        ++compiles;
      },
      std::move(t.started), [&] { report_progress(t); });  // also while the first candidates compile
  const double run_s = micros_since(t_run) / 1e6;

  capnp::MallocMessageBuilder m;
  auto wd = m.initRoot<proto::LoopMessage>().initWorkDone();
  wd.setWorker(static_cast<uint32_t>(links_.rank()));
  wd.setStep(t.step);
  wd.setRollouts(static_cast<uint32_t>(t.pending.size() + t.failed.size()));
  wd.setGenerateS(t.generate_s);
  wd.setCompileWaitS(std::max(0.0, run_s - evaluate_s));
  wd.setCompileCpuS(compile_cpu_s);
  wd.setEvaluateS(evaluate_s);
  wd.setCacheHits(hits);
  wd.setCompiles(compiles);
  links_.send(kCoordinator, m);
}

void WorkerRole::run() {
  const WeightSync ws = broadcast_policy_weights(policy_, weights_, false);  // the learner's initial weights
  log_->info("worker ready: pid {}, {} tasks, backend {}, initial weights checksum {}", getpid(), tasks_.size(),
             to_string(backend_), ws.checksum);
  while (!stop_requested()) {
    auto first = next_message(std::chrono::milliseconds(100));
    if (!first) continue;
    // Everything already queued joins one batch, so its compiles overlap its evaluations.
    std::vector<kj::Array<capnp::word>> batch;
    std::optional<kj::Array<capnp::word>> control;
    for (auto next = std::move(first); next; next = next_message(std::chrono::milliseconds(0))) {
      capnp::FlatArrayMessageReader reader(*next);
      if (reader.getRoot<proto::LoopMessage>().isAssignment()) {
        batch.push_back(std::move(*next));
      } else {
        control = std::move(next);
        break;
      }
    }
    if (!batch.empty()) process(batch);
    if (!control) continue;
    capnp::FlatArrayMessageReader reader(*control);
    auto msg = reader.getRoot<proto::LoopMessage>();
    if (msg.isStop()) return;
    if (msg.isMemoryContext()) continue;  // the answer to a query given up on
    if (msg.isSync()) sync(msg.getSync().getWeightsVersion());
    else throw LeapError("worker: unexpected message");
  }
}

}  // namespace leap
