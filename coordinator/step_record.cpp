#include "coordinator/step_record.h"

#include <algorithm>

#include "common/capnp_util.h"

namespace leap {

nlohmann::json step_record(int step, proto::StepResult::Reader sr) {
  const double n = std::max(1u, sr.getRollouts());
  std::vector<double> solve;
  for (auto c : sr.getSolvedBy()) solve.push_back(c / n);
  std::vector<double> rewards = to_vector<double>(sr.getRewards());
  double mean_reward = 0;
  for (double r : rewards) mean_reward += r / std::max<size_t>(1, rewards.size());
  return {{"step", step},
          {"solve_at", solve},
          {"dcp", {{"easy", sr.getEasy()}, {"medium", sr.getMedium()}, {"hopeless", sr.getHopeless()}, {"voided", sr.getVoided()}}},
          {"mean_reward", mean_reward},
          {"rewards", rewards},
          {"loss", sr.getLoss()},
          {"entropy", sr.getEntropy()},
          {"kl", sr.getKl()},
          {"evaluations", sr.getOutcomes()},
          {"samples", sr.getSamples()},
          {"lone_samples", sr.getLoneSamples()},
          {"staleness", to_vector<uint32_t>(sr.getStaleness())},
          {"learn_s", sr.getLearnS()},
          {"learner_bookkeeping_s", sr.getBookkeepingS()}};
}

void complete_record(nlohmann::json& rec, const LiveStep& ls, size_t workers, uint64_t version,
                     const std::string& checksum, const StepTimes& t) {
  const double nw = static_cast<double>(workers);
  const double wall_s = t.wall_s, broadcast_s = t.broadcast_s, checkpoint_s = t.checkpoint_s;
  double gen = 0, cwait = 0, ccpu = 0, eval = 0;
  uint32_t hits = 0, compiles = 0;
  for (const auto& [r, w] : ls.work) {
    gen += w.generate_s / nw;
    cwait += w.compile_wait_s / nw;
    ccpu += w.compile_cpu_s;
    eval += w.evaluate_s / nw;
    hits += w.hits;
    compiles += w.compiles;
  }
  const double learn = rec["learn_s"].get<double>();
  const double bookkeeping = ls.bookkeeping_s + rec["learner_bookkeeping_s"].get<double>();
  const double idle = std::max(0.0, wall_s - gen - cwait - eval - learn - broadcast_s - checkpoint_s - bookkeeping);
  rec["wall_s"] = wall_s;
  rec["interval_s"] = t.interval_s;  // since the previous step's record: the step time when steps overlap
  rec["evals_per_s"] = rec["evaluations"].get<double>() / std::max(wall_s, 1e-9);
  rec["cache_hit_rate"] = compiles ? static_cast<double>(hits) / compiles : 0.0;
  rec["compile_cpu_s"] = ccpu;
  rec["time_s"] = {{"generate", gen}, {"compile", cwait}, {"evaluate", eval}, {"learn", learn},
                   {"broadcast", broadcast_s}, {"checkpoint", checkpoint_s}, {"bookkeeping", bookkeeping},
                   {"idle", idle}};
  rec["overhead_fraction"] = (bookkeeping + broadcast_s) / std::max(wall_s, 1e-9);
  rec["sync_s"] = t.sync_s;
  rec["weights_version"] = version;
  rec["weights_checksum"] = checksum;
  rec["tasks"] = ls.tasks;
}

}  // namespace leap
