#include "coordinator/coordinator_role.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "common/capnp_util.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/outcome_proto.h"
#include "common/run_dir.h"
#include "coordinator/step_record.h"
#include "proto/leap.capnp.h"

namespace fs = std::filesystem;

namespace leap {
namespace {

constexpr int kLearner = 1, kFirstWorker = 2;

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string duration_text(double s) {
  const long t = static_cast<long>(s + 0.5);
  return t >= 60 ? fmt::format("{}m{:02d}s", t / 60, t % 60) : fmt::format("{}s", t);
}

}  // namespace

uint64_t rollout_seed(uint64_t run_seed, uint64_t group, uint32_t rollout, uint32_t turn) {
  return splitmix(splitmix(splitmix(run_seed) ^ group) ^ (static_cast<uint64_t>(rollout) << 8 | turn));
}

struct CoordinatorRole::Impl {
  struct WorkerState {
    size_t outstanding = 0;  // rollouts assigned and not reported done
    Clock::time_point last_heard = Clock::now();
  };

  LoopLinks& links;
  CoordinatorSettings s;
  std::shared_ptr<spdlog::logger> log;
  std::mt19937_64 sampler;
  int start_step = 0;
  uint64_t version = 0;
  std::map<int, WorkerState> workers;
  std::map<uint64_t, std::string> group_task;
  double elapsed_s = 0;  // over the steps of this invocation, for the ETA

  // Steps overlap under [run] max_staleness: step n opens once step n-1 is collected (its
  // update may still run) and every rank holds weights no older than on_policy(n) - max_staleness.
  uint64_t start_version = 0;
  uint64_t synced_version = 0;  // the version every rank holds (the last completed broadcast)
  int next_open = 0;
  bool collecting = false;      // a step's groups are still being generated and judged
  std::map<int, LiveStep> live;
  struct Broadcast {
    int step = 0;
    bool checkpoint = false;  // its folder in `checkpoints`
    std::map<int, std::string> checksums;
    double broadcast_s = 0;
    double checkpoint_s = 0;  // the learner's save
    Clock::time_point start = Clock::now();
  };
  std::optional<Broadcast> broadcast;  // at most one: the learner's next update waits for it
  // A checkpoint from its step's result on: its folder completes (state.json, then the rename) once
  // the step is recorded and the learner has written its policy there, which it may do after the
  // step, beside training, or before every rank has answered the broadcast.
  struct Checkpoint {
    int completed = 0;
    uint64_t version = 0;
    std::string checksum, sampler_after, tmp_dir, final_dir;
    bool recorded = false, written = false;
    double write_s = 0;
  };
  std::map<int, Checkpoint> checkpoints;  // by step
  int recorded = 0;                    // steps recorded by this invocation
  Clock::time_point last_record = Clock::now();

  Impl(LoopLinks& l, CoordinatorSettings st, std::shared_ptr<spdlog::logger> lg)
      : links(l), s(std::move(st)), log(std::move(lg)), sampler(s.run.seed) {
    for (int r = kFirstWorker; r < links.world(); ++r) workers[r];
  }

  void load_checkpoint() {
    std::ifstream in(s.resume_dir + "/state.json");
    auto j = nlohmann::json::parse(in);
    start_step = j.at("completed_steps").get<int>();
    version = j.at("weights_version").get<uint64_t>();
    start_version = synced_version = version;
    std::istringstream ss(j.at("sampler").get<std::string>());
    ss >> sampler;
    truncate_jsonl(s.run_dir + "/metrics.jsonl", start_step);
    log->info("resuming from {} (step {}, weights version {})", s.resume_dir, start_step, version);
  }

  std::vector<std::string> pick_tasks() {
    std::vector<std::string> pool = s.tasks, picked;
    const size_t n = std::min(pool.size(), static_cast<size_t>(s.run.tasks_per_step));
    for (size_t i = 0; i < n; ++i) {
      size_t k = std::uniform_int_distribution<size_t>(0, pool.size() - 1)(sampler);
      picked.push_back(pool[k]);
      pool.erase(pool.begin() + static_cast<long>(k));
    }
    return picked;
  }

  struct Work {
    uint32_t rollout = 0;
    bool has_prior = false;
    std::vector<int32_t> actions;
    Status status = Status::ok;
    Check check = Check::none;
    std::string feedback;
  };

  // Splits a group-turn's rollouts over the workers with the least outstanding work.
  void assign(int step, uint64_t group, uint32_t turn, const std::vector<Work>& work) {
    const size_t nw = workers.size();
    const size_t chunk = (work.size() + nw - 1) / nw;
    for (size_t at = 0; at < work.size(); at += chunk) {
      auto w = std::min_element(workers.begin(), workers.end(),
                                [](const auto& a, const auto& b) { return a.second.outstanding < b.second.outstanding; });
      const size_t n = std::min(chunk, work.size() - at);
      capnp::MallocMessageBuilder m;
      auto a = m.initRoot<proto::LoopMessage>().initAssignment();
      a.setStep(static_cast<uint32_t>(step));
      a.setGroup(group);
      a.setTask(group_task.at(group));
      a.setTurn(turn);
      a.setWeightsVersion(version);
      auto rs = a.initRollouts(static_cast<unsigned>(n));
      for (unsigned i = 0; i < n; ++i) {
        const Work& wk = work[at + i];
        rs[i].setRollout(wk.rollout);
        rs[i].setSeed(rollout_seed(s.run.seed, group, wk.rollout, turn));
        rs[i].setHasPrior(wk.has_prior);
        if (wk.has_prior) {
          auto p = rs[i].initPrior();
          auto acts = p.initActions(static_cast<unsigned>(wk.actions.size()));
          for (unsigned k = 0; k < wk.actions.size(); ++k) acts.set(k, wk.actions[k]);
          p.setStatus(to_proto(wk.status));
          p.setCheck(to_proto(wk.check));
          p.setFeedback(wk.feedback);
        }
      }
      if (w->second.outstanding == 0) w->second.last_heard = Clock::now();
      w->second.outstanding += n;
      links.send(w->first, m);
    }
  }

  void check_workers() {
    if (stop_requested()) throw LeapError("stopped by a signal (the launcher stops every rank when one fails; see its message)");
    for (const auto& [rank, w] : workers) {
      double silent = micros_since(w.last_heard) / 1e6;
      if (w.outstanding > 0 && silent > s.run.worker_timeout_s)
        throw LeapError(fmt::format("worker rank {} holds {} rollout(s) and has sent nothing for {:.0f} s "
                                    "([run] worker_timeout_s = {:.0f})",
                                    rank, w.outstanding, silent, s.run.worker_timeout_s));
    }
  }

  kj::Array<capnp::word> next_message() {
    for (;;) {
      auto words = links.inbox().receive(std::chrono::milliseconds(100));
      if (words) return std::move(*words);
      check_workers();
    }
  }

  // The worker a report names; a report from another rank is a protocol error.
  auto& reporting_worker(uint32_t rank, const char* report) {
    auto it = workers.find(static_cast<int>(rank));
    if (it == workers.end()) throw LeapError(fmt::format("{} from rank {}, not a worker", report, rank));
    return it->second;
  }

  void on_progress(proto::WorkProgress::Reader wp) { reporting_worker(wp.getWorker(), "progress report").last_heard = Clock::now(); }

  void on_work_done(proto::WorkDone::Reader wd) {
    auto& w = reporting_worker(wd.getWorker(), "work report");
    w.outstanding -= std::min<size_t>(w.outstanding, wd.getRollouts());
    w.last_heard = Clock::now();
    auto st = live.find(static_cast<int>(wd.getStep()));
    if (st == live.end()) return;  // a batch of a step recorded already cannot be (steps record after their work)
    auto& a = st->second.work[static_cast<int>(wd.getWorker())];
    a.generate_s += wd.getGenerateS();
    a.compile_wait_s += wd.getCompileWaitS();
    a.compile_cpu_s += wd.getCompileCpuS();
    a.evaluate_s += wd.getEvaluateS();
    a.hits += wd.getCacheHits();
    a.compiles += wd.getCompiles();
  }

  uint64_t on_policy(int step) const { return start_version + static_cast<uint64_t>(step - start_step); }

  // Opens the next step when the staleness bound allows it.
  void try_open() {
    if (collecting || next_open >= s.run.steps) return;
    if (synced_version + static_cast<uint64_t>(s.run.max_staleness) < on_policy(next_open)) return;
    open_step(next_open++);
  }

  // Tells the learner the step's groups and assigns every group's turn 1.
  void open_step(int step) {
    LiveStep& ls = live[step];
    ls.tasks = pick_tasks();
    std::ostringstream ss;
    ss << sampler;
    ls.sampler_after = ss.str();
    const auto& tasks = ls.tasks;
    capnp::MallocMessageBuilder m;
    auto so = m.initRoot<proto::LoopMessage>().initStepOpen();
    so.setStep(static_cast<uint32_t>(step));
    auto gs = so.initGroups(static_cast<unsigned>(tasks.size()));
    for (unsigned i = 0; i < tasks.size(); ++i) {
      uint64_t id = static_cast<uint64_t>(step) * static_cast<uint64_t>(s.run.tasks_per_step) + i;
      group_task[id] = tasks[i];
      gs[i].setGroup(id);
      gs[i].setTask(tasks[i]);
    }
    links.send(kLearner, m);
    for (unsigned i = 0; i < tasks.size(); ++i) {
      std::vector<Work> work;
      for (int r = 0; r < s.group_size; ++r) {
        work.emplace_back();
        work.back().rollout = static_cast<uint32_t>(r);
      }
      assign(step, gs[i].getGroup(), 1, work);
    }
    collecting = true;
  }

  // Every step to its record: routes the learner's refinement decisions to workers, opens steps
  // as the staleness bound allows, broadcasts each update's weights and records the step.
  void run_steps() {
    last_record = Clock::now();
    try_open();
    while (start_step + recorded < s.run.steps || !checkpoints.empty()) {
      auto words = next_message();
      auto t0 = Clock::now();
      capnp::FlatArrayMessageReader reader(words);
      auto msg = reader.getRoot<proto::LoopMessage>();
      int charged = -1;  // the step whose bookkeeping this message is
      switch (msg.which()) {
        case proto::LoopMessage::WORK_DONE:
          on_work_done(msg.getWorkDone());
          charged = static_cast<int>(msg.getWorkDone().getStep());
          break;
        case proto::LoopMessage::PROGRESS: on_progress(msg.getProgress()); break;
        case proto::LoopMessage::DECISION: {
          auto d = msg.getDecision();
          std::vector<Work> work;
          for (auto r : d.getRollouts()) {
            auto p = r.getPrior();
            work.push_back({r.getRollout(), true, to_vector<int32_t>(p.getActions()), from_proto(p.getStatus()),
                            from_proto(p.getCheck()), p.getFeedback()});
          }
          assign(static_cast<int>(d.getStep()), d.getGroup(), d.getTurn(), work);
          charged = static_cast<int>(d.getStep());
          break;
        }
        case proto::LoopMessage::STEP_COLLECTED:
          collecting = false;
          try_open();
          break;
        case proto::LoopMessage::STEP_RESULT:
          on_step_result(msg.getStepResult());
          charged = static_cast<int>(msg.getStepResult().getStep());
          break;
        case proto::LoopMessage::SYNCED: on_synced(msg.getSynced()); break;
        case proto::LoopMessage::CHECKPOINT_WRITTEN: on_checkpoint_written(msg.getCheckpointWritten()); break;
        default: throw LeapError("coordinator: unexpected message during the run");
      }
      if (auto it = live.find(charged); it != live.end()) it->second.bookkeeping_s += micros_since(t0) / 1e6;
    }
  }

  // The learner's update of a step: its record starts, and every rank broadcasts the new weights
  // (the learner saves a checkpoint into a temporary directory first if one is due).
  void on_step_result(proto::StepResult::Reader sr) {
    const int step = static_cast<int>(sr.getStep());
    if (broadcast) throw LeapError(fmt::format("coordinator: step {}'s result arrived during step {}'s broadcast", step, broadcast->step));
    auto it = live.find(step);
    if (it == live.end()) throw LeapError(fmt::format("coordinator: a result for step {}, which is not open", step));
    version = sr.getWeightsVersion();
    it->second.rec = step_record(step, sr);
    const int completed = step + 1;
    Broadcast b;
    b.step = step;
    b.checkpoint = completed % s.run.checkpoint_every == 0 || completed == s.run.steps;
    if (b.checkpoint) {
      Checkpoint& c = checkpoints[step];
      c.completed = completed;
      c.final_dir = checkpoint_dir(s.run_dir, completed);
      c.tmp_dir = c.final_dir + ".tmp";
      fs::remove_all(c.tmp_dir);
      fs::create_directories(c.tmp_dir);
    }
    for (int r = kLearner; r < links.world(); ++r) {
      capnp::MallocMessageBuilder m;
      auto sy = m.initRoot<proto::LoopMessage>().initSync();
      sy.setStep(static_cast<uint32_t>(step));
      sy.setWeightsVersion(version);
      if (b.checkpoint && r == kLearner) sy.setCheckpointDir(checkpoints.at(step).tmp_dir);
      links.send(r, m);
    }
    broadcast = std::move(b);
  }

  // A rank's report that it holds the new weights; with every rank's the step is recorded (all
  // checksums must equal the learner's).
  void on_synced(proto::Synced::Reader sd) {
    if (!broadcast) throw LeapError("coordinator: a weights report outside a broadcast");
    if (sd.getWeightsVersion() != version)
      throw LeapError(fmt::format("rank {} reports weights version {}, expected {}", sd.getRank(), sd.getWeightsVersion(), version));
    Broadcast& b = *broadcast;
    b.checksums[static_cast<int>(sd.getRank())] = sd.getChecksum();
    b.broadcast_s = std::max(b.broadcast_s, sd.getBroadcastS());
    b.checkpoint_s = std::max(b.checkpoint_s, sd.getCheckpointS());
    if (workers.count(static_cast<int>(sd.getRank()))) workers[static_cast<int>(sd.getRank())].last_heard = Clock::now();
    if (b.checksums.size() < static_cast<size_t>(links.world() - 1)) return;
    const std::string checksum = b.checksums.at(kLearner);
    for (const auto& [r, c] : b.checksums)
      if (c != checksum)
        throw LeapError(fmt::format("weights differ after the broadcast: rank {} has {}, the learner {}", r, c, checksum));
    LiveStep& ls = live.at(b.step);
    nlohmann::json rec = std::move(ls.rec);
    const double wall_s = micros_since(ls.opened) / 1e6, interval_s = micros_since(last_record) / 1e6;
    last_record = Clock::now();
    complete_record(rec, ls, workers.size(), version, checksum,
                    {b.broadcast_s, b.checkpoint_s, micros_since(b.start) / 1e6, wall_s, interval_s});
    append_jsonl(s.run_dir + "/metrics.jsonl", rec);
    if (b.checkpoint) {
      Checkpoint& c = checkpoints.at(b.step);
      c.version = version;
      c.checksum = checksum;
      c.sampler_after = ls.sampler_after;
      c.recorded = true;
      complete_checkpoint(b.step);
    }
    elapsed_s += interval_s;
    ++recorded;
    if (s.progress) print_progress(b.step, rec, wall_s, b.checkpoint);
    live.erase(b.step);
    synced_version = version;
    broadcast.reset();
    try_open();
  }

  // The learner's report that a checkpoint's policy files are on disk.
  void on_checkpoint_written(proto::CheckpointWritten::Reader cw) {
    const int step = static_cast<int>(cw.getStep());
    auto it = checkpoints.find(step);
    if (it == checkpoints.end())
      throw LeapError(fmt::format("coordinator: the learner reports a checkpoint of step {}, which has none due", step));
    Checkpoint& c = it->second;
    if (cw.getDir() != c.tmp_dir)
      throw LeapError(fmt::format("coordinator: the learner wrote step {}'s checkpoint to {}, not {}", step,
                                  cw.getDir().cStr(), c.tmp_dir));
    c.written = true;
    c.write_s = cw.getWriteS();
    complete_checkpoint(step);
  }

  // The sampler as after the checkpointed step's draw: a step opened since (max_staleness > 0)
  // draws again, the same tasks, on resume.
  void complete_checkpoint(int step) {
    const Checkpoint& c = checkpoints.at(step);
    if (!c.recorded || !c.written) return;
    nlohmann::json state = {{"completed_steps", c.completed}, {"weights_version", c.version},
                            {"weights_checksum", c.checksum}, {"sampler", c.sampler_after}};
    std::ofstream(c.tmp_dir + "/state.json") << state.dump(2) << "\n";
    fs::remove_all(c.final_dir);
    fs::rename(c.tmp_dir, c.final_dir);
    // Debug: rank 0's info reaches the console, where the progress line marks checkpoints already
    // (the learner's log has each write's time).
    log->debug("checkpoint {} complete ({})", c.final_dir,
               c.write_s > 0 ? fmt::format("its policy written in {:.3f} s after the step", c.write_s)
                             : std::string("its policy saved on the step's path"));
    checkpoints.erase(step);
  }

  void print_progress(int step, const nlohmann::json& rec, double wall_s, bool ckpt) {
    const auto& solve = rec["solve_at"];
    const int done_here = step + 1 - start_step;
    const double eta = elapsed_s / done_here * (s.run.steps - step - 1);
    std::ostream& out = s.progress_label.empty() ? std::cout : std::cerr;
    const int voided = rec["dcp"].value("voided", 0);
    out << s.progress_label
        << fmt::format("step {}/{}  solve@1 {:.2f}  solve@{} {:.2f}  dcp e/m/h {}/{}/{}{}  entropy {:.2f}  "
                       "{:.1f} evals/s  cache {:.0f}%  {:.1f}s  ETA {}{}\n",
                       step + 1, s.run.steps, solve.front().get<double>(), solve.size(), solve.back().get<double>(),
                       rec["dcp"]["easy"].get<int>(), rec["dcp"]["medium"].get<int>(), rec["dcp"]["hopeless"].get<int>(),
                       voided > 0 ? fmt::format(" (+{} voided: infra_error)", voided) : "",
                       rec["entropy"].get<double>(), rec["evals_per_s"].get<double>(),
                       100 * rec["cache_hit_rate"].get<double>(), wall_s, duration_text(eta), ckpt ? "  [checkpoint]" : "")
        << std::flush;
  }
};

CoordinatorRole::CoordinatorRole(LoopLinks& links, CoordinatorSettings s, std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_shared<Impl>(links, std::move(s), std::move(log))) {}

void CoordinatorRole::run() {
  Impl& im = *impl_;
  if (im.s.tasks.empty()) throw LeapError("no tasks to run: the policy can write none of the selected tasks");
  if (!im.s.resume_dir.empty()) im.load_checkpoint();
  im.next_open = im.start_step;
  im.log->info("coordinator: steps {}..{}, {} tasks per step, {} workers, weights at most {} version(s) stale",
               im.start_step + 1, im.s.run.steps, im.s.run.tasks_per_step, im.workers.size(), im.s.run.max_staleness);
  im.run_steps();
  stop_all("run complete");
}

void CoordinatorRole::stop_all(const std::string& reason) {
  for (int r = 1; r < impl_->links.world(); ++r) {
    capnp::MallocMessageBuilder m;
    m.initRoot<proto::LoopMessage>().initStop().setReason(reason);
    try {
      impl_->links.send(r, m);
    } catch (const std::exception& e) {  // a dead rank cannot be told; the others still are
      impl_->log->warn("stop not delivered to rank {}: {}", r, e.what());
    }
  }
}

}  // namespace leap
