#include "learner/learner_role.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "common/capnp_util.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/outcome_proto.h"
#include "common/run_dir.h"
#include "learner/group_tracker.h"
#include "memory/memory.h"
#include "proto/leap.capnp.h"

namespace leap {
namespace {

constexpr int kCoordinator = 0;

std::vector<int32_t> ints(capnp::List<int32_t>::Reader r) { return to_vector<int32_t>(r); }

}  // namespace

struct LearnerRole::Impl {
  // Nested, not in the anonymous namespace: a unity build includes this file (-Wsubobject-linkage).
  struct Attempt {
    std::vector<int32_t> context, actions;
    double logprob = 0;
    Status status = Status::ok;
    Check check = Check::none;
    std::string feedback;  // as the judge's client cut it ([eval] max_feedback_bytes)
    uint32_t staleness = 0;
    std::vector<float> token_logprobs;
  };

  struct OpenGroup {
    std::string task;
    std::map<std::pair<int, int>, int64_t> cases;  // (rollout, turn) -> its case in the memory
    std::map<std::pair<int, int>, std::vector<int64_t>> retrieved;  // (rollout, turn) -> cases its prompt's context showed
    std::map<std::pair<int, int>, Attempt> attempts;  // (rollout, turn)
    std::map<int, Attempt> last;                       // rollout -> latest attempt
  };

  LoopLinks& links;
  WeightChannel& weights;
  Policy& policy;
  LearnerSettings s;
  std::shared_ptr<spdlog::logger> log;
  GroupTracker tracker;
  uint64_t version = 0;
  std::string outcomes_path;
  std::string advantages_path;  // each step's per-turn advantages (what the policy was trained with)

  // The current step.
  int step = -1;
  std::map<uint64_t, OpenGroup> groups;       // open groups of the step
  std::vector<kj::Array<capnp::word>> stash;   // results that arrived before their StepOpen
  size_t finals = 0, expected = 0, outcome_count = 0;
  // A training sample and the rollout-turn whose advantage it takes (set when the step is complete:
  // a sample alone at its turn in its group takes the step's leave-one-out).
  struct StepSample {
    TrainSample train;
    int rollout = 0, turn = 1;
  };
  std::map<uint64_t, std::vector<StepSample>> samples;  // by group: a deterministic batch order
  std::map<uint64_t, std::vector<Trajectory>> finished;  // the step's final groups
  std::vector<uint32_t> solved_by;
  std::map<uint64_t, std::vector<double>> rewards;  // by group: arrival order must not matter
  DcpCounts counts_before;
  double bookkeeping_s = 0;
  std::vector<uint32_t> staleness_counts;  // the step's rollout-turns by staleness

  // Weights versions: the one a step's rollouts would be generated with on-policy is the start's
  // plus the steps trained since ([run] max_staleness bounds how far behind they may be).
  uint64_t start_version = 0;
  uint64_t on_policy_version(uint32_t of_step) const {
    return start_version + static_cast<uint64_t>(std::max(0, static_cast<int>(of_step) - s.start_step));
  }

  // A collected step waiting for, or in, its update. The update runs beside the collection of the
  // next step (its results, the memory's queries and the DCP decisions go on meanwhile); the next
  // update starts once this one's weights are broadcast.
  struct Collected {
    int step = 0;
    std::vector<TrainSample> batch;
    size_t expected = 0, outcomes = 0, lone = 0;
    std::vector<uint32_t> solved_by, staleness;
    DcpCounts dcp;  // the step's groups by DCP's decision
    std::vector<double> rewards;
    double bookkeeping_s = 0;
  };
  std::deque<Collected> queued;
  std::optional<Collected> training_step;
  std::future<TrainStats> training;
  Clock::time_point training_start;
  bool sync_pending = false;  // a step result sent, its weights not yet broadcast
  // The latest checkpoint (step, folder) and its write from a snapshot, beside training.
  std::pair<int, std::string> checkpoint;
  std::future<double> checkpoint_write;

  std::unique_ptr<memory::Memory> mem;  // the experience graph ([memory] record)
  std::string device;
  std::vector<std::string> notes;  // the target's notes for the memory's cold tier

  Impl(LoopLinks& l, WeightChannel& w, Policy& p, LearnerSettings st, std::shared_ptr<spdlog::logger> lg)
      : links(l), weights(w), policy(p), s(std::move(st)), log(std::move(lg)), tracker(s.dcp, s.reward) {
    outcomes_path = s.run_dir + "/outcomes.jsonl";
    advantages_path = s.run_dir + "/advantages.jsonl";
    if (!s.memory_path.empty()) {
      mem = std::make_unique<memory::Memory>(s.memory_path);
      device = device_model(*backend_from(s.backend));
      if (s.context.notes) notes = memory::target_notes(s.backend, device);
    }
  }

  // A turn's outcome as a case refining the rollout's previous turn (leap's own faults are not).
  int64_t remember(OpenGroup& g, int rollout, int turn, const EvalOutcome& o, const std::string& source,
                   uint64_t weights_version, const std::string& decision) {
    if (!mem || o.status == Status::infra_error) return 0;
    memory::Case c = memory::case_of(o, source, device);
    c.decision = decision;
    c.task = g.task;
    c.turn = turn;
    c.policy = "leap run " + s.run_dir + " weights v" + std::to_string(weights_version);
    auto prev = g.cases.find({rollout, turn - 1});
    c.predecessor = prev == g.cases.end() ? 0 : prev->second;
    c.relation = c.predecessor ? "refined" : "";
    if (auto r = g.retrieved.find({rollout, turn}); r != g.retrieved.end()) c.retrieved = r->second;
    return g.cases[{rollout, turn}] = mem->add(c);
  }

  // A worker's question for its rollouts' next prompts: the memory's context for each, built here
  // where the memory is written (the one owner), with a rollout's previous turn as the previous attempt.
  void on_memory_query(proto::MemoryQuery::Reader q) {
    capnp::MallocMessageBuilder m;
    auto a = m.initRoot<proto::LoopMessage>().initMemoryContext();
    a.setId(q.getId());
    auto items = q.getRollouts();
    auto out = a.initContexts(items.size());  // empty contexts without a memory to serve
    for (unsigned i = 0; mem && s.serve_context && i < items.size(); ++i) {
      const int rollout = static_cast<int>(items[i].getRollout()), turn = static_cast<int>(items[i].getTurn());
      auto g = groups.find(items[i].getGroup());
      OpenGroup* group = g != groups.end() && step == static_cast<int>(q.getStep()) ? &g->second : nullptr;
      int64_t previous = 0;
      if (group)
        if (auto c = group->cases.find({rollout, turn - 1}); c != group->cases.end()) previous = c->second;
      auto ctx = memory::build_context(*mem, {items[i].getTask(), s.backend, device, previous, "", notes}, s.context.rules,
                                       memory::approximate_tokens, s.context.labels, s.context.ranks);
      if (group) group->retrieved[{rollout, turn}] = ctx.cases_shown(previous);
      if (!ctx.items.empty()) out[i].setText(ctx.text());
      out[i].setTokens(static_cast<uint32_t>(ctx.tokens));
    }
    links.send(static_cast<int>(q.getWorker()), m);
  }

  void send_decision(const GroupEvent& e) {
    capnp::MallocMessageBuilder m;
    auto d = m.initRoot<proto::LoopMessage>().initDecision();
    d.setStep(static_cast<uint32_t>(step));
    d.setGroup(e.group);
    d.setTurn(static_cast<uint32_t>(e.turn));
    d.setDifficulty(to_string(e.difficulty));
    auto rs = d.initRollouts(static_cast<unsigned>(e.rollouts.size()));
    auto& g = groups.at(e.group);
    for (unsigned i = 0; i < e.rollouts.size(); ++i) {
      const Attempt& a = g.last.at(e.rollouts[i]);
      rs[i].setRollout(static_cast<uint32_t>(e.rollouts[i]));
      rs[i].setHasPrior(true);
      auto p = rs[i].initPrior();
      auto acts = p.initActions(static_cast<unsigned>(a.actions.size()));
      for (unsigned k = 0; k < a.actions.size(); ++k) acts.set(k, a.actions[k]);
      p.setStatus(to_proto(a.status));
      p.setCheck(to_proto(a.check));
      p.setFeedback(a.feedback);
    }
    links.send(kCoordinator, m);
  }

  void on_final(const GroupEvent& e) {
    auto& g = groups.at(e.group);
    const int G = s.dcp.group_size;
    std::vector<double> r;
    if (s.reward.kind == RewardKind::rank) r = rank_rewards(e.trajectories, s.reward.speedup_tiebreak);
    for (int i = 0; i < G; ++i) {
      const auto& traj = e.trajectories[static_cast<size_t>(i)];
      int solved_at = 0;
      for (size_t t = 0; t < traj.size() && !solved_at; ++t)
        if (traj[t].correct) solved_at = static_cast<int>(t) + 1;
      for (int t = 1; t <= s.dcp.max_turns; ++t)
        if (solved_at && solved_at <= t) solved_by[static_cast<size_t>(t - 1)]++;
      rewards[e.group].push_back(s.reward.kind == RewardKind::rank ? r[static_cast<size_t>(i)] : e.advantages[static_cast<size_t>(i)][0]);
      for (size_t t = 0; t < traj.size(); ++t) {
        const int turn = static_cast<int>(t) + 1;
        const Attempt& a = g.attempts.at({i, turn});
        if (a.actions.empty() && a.context.empty()) continue;  // nothing to learn from (generation failed)
        if (traj.back().infra) continue;                       // leap's fault: no signal for the policy
        samples[e.group].push_back({{a.context, a.actions, a.logprob, 0.0, a.staleness, a.token_logprobs}, i, turn});
      }
    }
    finished[e.group] = e.trajectories;
    ++finals;
  }

  void on_result(proto::RolloutResult::Reader r) {
    auto it = groups.find(r.getGroup());
    if (it == groups.end()) throw LeapError(fmt::format("result for group {} that is not open", r.getGroup()));
    EvalOutcome o = from_proto(r.getOutcome());
    auto gen = r.getGeneration();
    const uint64_t on_policy = on_policy_version(r.getStep());
    const uint32_t stale = on_policy > r.getWeightsVersion() ? static_cast<uint32_t>(on_policy - r.getWeightsVersion()) : 0;
    Attempt a{ints(gen.getContext()), ints(gen.getActions()), gen.getLogprob(), o.status, o.check, o.feedback,
              stale, to_vector<float>(gen.getTokenLogprobs())};
    if (staleness_counts.size() <= stale) staleness_counts.resize(stale + 1, 0);
    staleness_counts[stale]++;
    const int rollout = static_cast<int>(r.getRollout()), turn = static_cast<int>(r.getTurn());
    // The record `leap eval --out` writes (to_json), and the rollout's keys.
    nlohmann::json j = to_json(o);
    j.update({{"step", r.getStep()},
              {"group", r.getGroup()},
              {"rollout", rollout},
              {"turn", turn},
              {"worker", r.getWorker()},
              {"weights_version", r.getWeightsVersion()},
              {"staleness", stale},
              {"choice", gen.getSummary().cStr()},
              {"prompt_tokens", gen.getContext().size()},
              {"memory_chars", gen.getMemoryChars()},
              {"span",
               {{"generate", {gen.getStartS(), gen.getEndS()}},
                {"compile", {o.stages.compile_start_s, o.stages.compile_end_s}},
                {"evaluate", {o.stages.eval_start_s, o.stages.eval_end_s}}}}});
    if (int64_t id = remember(it->second, rollout, turn, o, r.getSource().cStr(), r.getWeightsVersion(),
                              gen.getDecision().cStr()))
      j["case"] = id;
    append_jsonl(outcomes_path, j);
    ++outcome_count;
    it->second.attempts[{rollout, turn}] = a;
    it->second.last[rollout] = a;
    auto events = tracker.record(
        {r.getGroup(), rollout, turn, {o.status == Status::ok, o.speedup, o.status == Status::infra_error}});
    for (const auto& e : events) {
      if (e.kind == GroupEvent::Kind::schedule) send_decision(e);
      else on_final(e);
    }
    if (expected > 0 && finals == expected) finish_step();
  }

  void on_step_open(proto::StepOpen::Reader so) {
    step = static_cast<int>(so.getStep());
    groups.clear();
    samples.clear();
    finished.clear();
    rewards.clear();
    solved_by.assign(static_cast<size_t>(s.dcp.max_turns), 0);
    finals = 0;
    outcome_count = 0;
    bookkeeping_s = 0;
    staleness_counts.assign(1, 0);
    counts_before = tracker.counts();
    expected = so.getGroups().size();
    for (auto g : so.getGroups()) {
      groups[g.getGroup()].task = g.getTask();
      tracker.open(g.getGroup());
    }
    auto pending = std::move(stash);
    stash.clear();
    for (auto& words : pending) handle(words);
  }

  void finish_step() {
    // The trainers' estimator computes the same (learner/credit_c.cpp).
    std::vector<std::vector<Trajectory>> groups_of_step;
    std::map<uint64_t, size_t> index;
    for (const auto& [id, t] : finished) {
      index[id] = groups_of_step.size();
      groups_of_step.push_back(t);
    }
    const StepCredit credit = step_advantages(groups_of_step, s.reward);
    std::vector<nlohmann::json> lines;
    for (const auto& [id, k] : index)
      for (size_t i = 0; i < credit.advantages[k].size(); ++i)
        for (size_t t = 0; t < credit.advantages[k][i].size(); ++t)
          lines.push_back({{"step", step}, {"group", id}, {"rollout", i}, {"turn", t + 1},
                           {"advantage", credit.advantages[k][i][t]}});
    append_jsonl_lines(advantages_path, lines);
    std::vector<TrainSample> batch;
    for (auto& [id, v] : samples)
      for (auto& x : v) {
        x.train.advantage = credit.advantages[index.at(id)][static_cast<size_t>(x.rollout)][static_cast<size_t>(x.turn - 1)];
        batch.push_back(x.train);
      }
    Collected col;
    col.step = step;
    col.batch = std::move(batch);
    col.expected = expected;
    col.outcomes = outcome_count;
    col.lone = credit.lone;
    col.solved_by = solved_by;
    col.staleness = staleness_counts;
    col.dcp = tracker.counts().since(counts_before);
    for (const auto& [g, r] : rewards) col.rewards.insert(col.rewards.end(), r.begin(), r.end());
    col.bookkeeping_s = bookkeeping_s;
    expected = 0;  // the step is collected; its groups are closed
    capnp::MallocMessageBuilder m;
    m.initRoot<proto::LoopMessage>().initStepCollected().setStep(static_cast<uint32_t>(step));
    links.send(kCoordinator, m);
    queued.push_back(std::move(col));
    start_training();
  }

  // The policy is the update's alone while it runs: only on_sync uses it besides, and a sync is
  // never due then (the next update waits for the last one's broadcast).
  void start_training() {
    if (training.valid() || sync_pending || queued.empty()) return;
    training_step = std::move(queued.front());
    queued.pop_front();
    training_start = Clock::now();
    training = std::async(std::launch::async, [this] { return policy.train(training_step->batch); });
  }

  // The update's end: the new weights version and the step's result to the coordinator.
  void poll_training(std::chrono::milliseconds wait) {
    if (!training.valid() || training.wait_for(wait) != std::future_status::ready) return;
    const TrainStats ts = training.get();
    const double learn_s = micros_since(training_start) / 1e6;
    const Collected& col = *training_step;
    ++version;
    capnp::MallocMessageBuilder m;
    auto sr = m.initRoot<proto::LoopMessage>().initStepResult();
    sr.setStep(static_cast<uint32_t>(col.step));
    sr.setWeightsVersion(version);
    sr.setRollouts(static_cast<uint32_t>(col.expected * static_cast<size_t>(s.dcp.group_size)));
    auto sb = sr.initSolvedBy(static_cast<unsigned>(col.solved_by.size()));
    for (unsigned t = 0; t < col.solved_by.size(); ++t) sb.set(t, col.solved_by[t]);
    sr.setEasy(static_cast<uint32_t>(col.dcp.easy));
    sr.setMedium(static_cast<uint32_t>(col.dcp.medium));
    sr.setHopeless(static_cast<uint32_t>(col.dcp.hopeless));
    sr.setVoided(static_cast<uint32_t>(col.dcp.voided));
    sr.setLoneSamples(static_cast<uint32_t>(col.lone));
    auto rw = sr.initRewards(static_cast<unsigned>(col.rewards.size()));
    for (unsigned i = 0; i < col.rewards.size(); ++i) rw.set(i, col.rewards[i]);
    auto st = sr.initStaleness(static_cast<unsigned>(col.staleness.size()));
    for (unsigned i = 0; i < col.staleness.size(); ++i) st.set(i, col.staleness[i]);
    sr.setLoss(ts.loss);
    sr.setEntropy(ts.entropy);
    sr.setKl(ts.kl);
    sr.setLearnS(learn_s);
    sr.setBookkeepingS(col.bookkeeping_s);
    sr.setOutcomes(static_cast<uint32_t>(col.outcomes));
    sr.setSamples(static_cast<uint32_t>(col.batch.size()));
    links.send(kCoordinator, m);
    sync_pending = true;
    log->info("step {}: {} samples ({} trained, {} stale, importance weight {:.3f}), loss {:.4f}, entropy {:.3f}, "
              "behaviour log-prob gap {:.2g}, weights version {}",
              col.step, col.batch.size(), ts.trained, ts.stale, ts.stale_weight, ts.loss, ts.entropy, ts.behaviour_gap,
              version);
    training_step.reset();
  }

  void on_sync(proto::Sync::Reader sy) {
    auto t0 = Clock::now();
    const WeightSync ws = broadcast_policy_weights(policy, weights, true);
    const double bcast_s = micros_since(t0) / 1e6;
    if (sy.getWeightsVersion() != version)
      throw LeapError(fmt::format("coordinator syncs weights version {}, the learner has {}", sy.getWeightsVersion(), version));
    std::string dir = sy.getCheckpointDir();
    double save_s = 0;
    std::unique_ptr<PolicySnapshot> snap;
    if (!dir.empty()) {
      finish_checkpoint();  // one write at a time: a snapshot's copies are as large as the model's state
      const auto t_save = Clock::now();
      snap = policy.snapshot();
      if (!snap) policy.save(dir);
      save_s = micros_since(t_save) / 1e6;
    }
    sync_pending = false;
    capnp::MallocMessageBuilder m;
    auto sd = m.initRoot<proto::LoopMessage>().initSynced();
    sd.setRank(static_cast<uint32_t>(links.rank()));
    sd.setWeightsVersion(version);
    sd.setChecksum(ws.checksum);
    sd.setBroadcastS(bcast_s);
    sd.setCheckpointS(save_s);
    links.send(kCoordinator, m);
    log->info("weights version {} checksum {} ({} bytes in {} bucket(s))", version, ws.checksum, ws.bytes, ws.buckets);
    if (!dir.empty()) {
      checkpoint = {static_cast<int>(sy.getStep()), dir};
      if (snap) {
        log->info("checkpoint {}: state copied in {:.3f} s, written beside training", dir, save_s);
        checkpoint_write = std::async(std::launch::async, [snap = std::move(snap), dir] {
          const auto t0 = Clock::now();
          snap->write(dir);
          return micros_since(t0) / 1e6;
        });
      } else {
        log->info("checkpoint {}: saved in {:.3f} s on the step's path (the policy keeps no copy to write later)", dir, save_s);
        report_checkpoint(0);
      }
    }
    start_training();
  }

  // The checkpoint being written, once on disk, to the coordinator (which completes its folder);
  // a failed write is the learner's error. `wait`: until it ends.
  void finish_checkpoint(bool wait = true) {
    if (!checkpoint_write.valid()) return;
    if (!wait && checkpoint_write.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    double write_s = 0;
    try {
      write_s = checkpoint_write.get();
    } catch (const std::exception& e) {
      throw LeapError(fmt::format("checkpoint {}: the write failed: {}", checkpoint.second, e.what()));
    }
    log->info("checkpoint {}: written in {:.3f} s", checkpoint.second, write_s);
    report_checkpoint(write_s);
  }

  void report_checkpoint(double write_s) {
    capnp::MallocMessageBuilder m;
    auto cw = m.initRoot<proto::LoopMessage>().initCheckpointWritten();
    cw.setStep(static_cast<uint32_t>(checkpoint.first));
    cw.setDir(checkpoint.second);
    cw.setWriteS(write_s);
    links.send(kCoordinator, m);
  }

  // false: stop.
  bool handle(kj::Array<capnp::word>& words) {
    capnp::FlatArrayMessageReader reader(words);
    auto msg = reader.getRoot<proto::LoopMessage>();
    auto t0 = Clock::now();
    switch (msg.which()) {
      case proto::LoopMessage::RESULT:
        if (!groups.count(msg.getResult().getGroup()) && step < static_cast<int>(msg.getResult().getStep())) {
          stash.push_back(kj::heapArray<capnp::word>(words.asPtr()));
          return true;
        }
        on_result(msg.getResult());
        break;
      case proto::LoopMessage::STEP_OPEN: on_step_open(msg.getStepOpen()); break;
      case proto::LoopMessage::MEMORY_QUERY: on_memory_query(msg.getMemoryQuery()); break;
      case proto::LoopMessage::SYNC: on_sync(msg.getSync()); return true;
      case proto::LoopMessage::STOP:
        if (training.valid()) training.wait();  // the update owns the policy until it ends
        if (checkpoint_write.valid()) checkpoint_write.wait();  // ends before the learner (unreported: its folder stays .tmp)
        return false;
      default: throw LeapError("learner: unexpected message");
    }
    bookkeeping_s += micros_since(t0) / 1e6;
    return true;
  }
};

LearnerRole::LearnerRole(LoopLinks& links, WeightChannel& weights, Policy& policy, LearnerSettings s,
                         std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_shared<Impl>(links, weights, policy, std::move(s), std::move(log))) {}

void LearnerRole::run() {
  Impl& im = *impl_;
  if (!im.s.resume_dir.empty()) {
    im.policy.load(im.s.resume_dir);
    std::ifstream in(im.s.resume_dir + "/state.json");
    im.version = nlohmann::json::parse(in).at("weights_version").get<uint64_t>();
    im.start_version = im.version;
    truncate_jsonl(im.outcomes_path, im.s.start_step);
    truncate_jsonl(im.advantages_path, im.s.start_step);
  }
  const WeightSync ws = broadcast_policy_weights(im.policy, im.weights, true);  // every worker starts from the learner's
  im.log->info("learner ready: weights version {} ({} parameters, checksum {}), broadcast over {}", im.version,
               ws.parameters, ws.checksum, im.weights.kind());
  while (!stop_requested()) {
    // While an update runs, its end is looked for between messages.
    auto words = im.links.inbox().receive(std::chrono::milliseconds(im.training.valid() || im.checkpoint_write.valid() ? 5 : 100));
    im.poll_training(std::chrono::milliseconds(0));
    im.finish_checkpoint(false);
    if (!words) continue;
    if (!im.handle(*words)) return;
  }
  if (im.training.valid()) im.training.wait();
  if (im.checkpoint_write.valid()) im.checkpoint_write.wait();
}

}  // namespace leap
