#include "policy/policy.h"

#include <algorithm>
#include <map>

#include "common/error.h"
#include "common/hash.h"
#include "policy/lm_policy.h"
#include "policy/schedule_policy.h"
#include "tasks/candidates.h"

namespace leap {
namespace {

// Candidates read from a folder or JSONL: evaluation runs, benchmarks and tests. Rollout
// seeds pick among a task's candidates; nothing is trained.
class ReplayPolicy : public Policy {
 public:
  explicit ReplayPolicy(const PolicyConfig& cfg) {
    if (cfg.candidates.empty()) throw LeapError("[policy] kind = \"replay\" needs candidates = FOLDER or FILE.jsonl");
    path_ = cfg.candidates;
  }
  std::string kind() const override { return "replay"; }
  bool can_write(const Task& task, Backend backend) const override { return !of(task.name, backend).empty(); }
  Generation generate(const Task& task, Backend backend, const PolicyContext& ctx, uint64_t seed) override {
    const auto& c = of(task.name, backend);
    if (c.empty()) throw LeapError("replay policy: no candidate for task " + task.name);
    const size_t i = (seed + static_cast<uint64_t>(ctx.turn)) % c.size();
    Generation g;
    g.source = c[i].source;
    g.summary = c[i].name;
    g.actions = {static_cast<int32_t>(i)};
    return g;
  }
  TrainStats train(const std::vector<TrainSample>& batch) override { return {0, 0, batch.size()}; }
  std::vector<float> weights() const override { return {}; }
  void set_weights(const std::vector<float>&) override {}
  void save(const std::string&) const override {}
  void load(const std::string&) override {}

 private:
  const std::vector<CandidateSource>& of(const std::string& task, Backend backend) const {
    if (!loaded_.count(backend)) {
      auto& by_task = loaded_[backend];
      for (auto& c : load_candidates(path_, backend)) by_task[c.task].push_back(std::move(c));
    }
    static const std::vector<CandidateSource> none;
    auto it = loaded_[backend].find(task);
    return it == loaded_[backend].end() ? none : it->second;
  }
  std::string path_;
  mutable std::map<Backend, std::map<std::string, std::vector<CandidateSource>>> loaded_;
};

}  // namespace

std::unique_ptr<Policy> make_policy(const PolicyConfig& cfg, uint64_t seed) {
  if (cfg.kind == "replay") return std::make_unique<ReplayPolicy>(cfg);
  if (cfg.kind == "schedule") return make_schedule_policy(cfg, seed);
  if (cfg.kind == "lm") return make_lm_policy(cfg);  // every rank loads the same folder
  throw LeapError("unknown policy kind '" + cfg.kind + "'");
}

std::string weights_checksum(const std::vector<float>& w) {
  return content_hash({std::string_view(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float))}).substr(0, 16);
}

WeightSync broadcast_policy_weights(Policy& policy, WeightChannel& channel, bool root) {
  WeightSync out;
  auto ts = policy.weight_tensors();
  const bool device = std::any_of(ts.begin(), ts.end(), [](const WeightTensor& t) { return t.device; });
  const DeviceCopy* copy = device ? policy.device_copy() : nullptr;
  if (!ts.empty() && (!device || channel.moves_device_memory() || copy)) {
    // Device tensors over a host channel: staged a bucket at a time, in their own dtype.
    auto st = device && !channel.moves_device_memory()
                  ? channel.broadcast_staged(ts, root, policy.broadcast_bucket_bytes(), *copy)
                  : channel.broadcast_tensors(ts, root, policy.broadcast_bucket_bytes());
    for (const auto& t : ts) out.parameters += t.bytes / dtype_bytes(t.dtype);
    out.bytes = st.bytes;
    out.buckets = st.buckets;
    // Device memory is hashed a slice at a time through the host; without a copier, through
    // the policy's whole fp32 host copy.
    out.checksum = device && !copy ? weights_checksum(policy.weights()) : tensors_checksum(ts, copy);
    return out;
  }
  std::vector<float> w;
  if (root) w = policy.weights();
  channel.broadcast(w, root);
  if (!root) policy.set_weights(w);
  out.parameters = w.size();
  out.bytes = w.size() * sizeof(float);
  out.buckets = 1;
  out.checksum = weights_checksum(w);
  return out;
}

}  // namespace leap
