// Policies that write kernels, shared by workers (generation) and the learner (training).
// The interface is narrow on purpose: a policy generates from a turn context and records what
// it conditioned on (context ids) and what it chose (action ids) with the behaviour
// log-probability; training consumes those records with advantages. A causal language model
// fits the same shape (context = prompt tokens, actions = generated tokens).
// No LibTorch in this header: roles include it without paying for torch.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/outcome.h"
#include "common/weight_channel.h"
#include "tasks/task.h"

namespace leap {

struct PolicyContext {
  int turn = 1;
  // The rollout's previous attempt (turn > 1): what was chosen, its verdict and feedback.
  std::vector<int32_t> prev_actions;
  Status prev_status = Status::ok;
  Check prev_check = Check::none;
  std::string prev_feedback;
  bool greedy = false;  // the most likely choice instead of a sample (held-out evaluation)
  std::string memory;   // the experience memory's context for this attempt ([memory] prompts; "" = none)
};

struct Generation {
  std::string source;
  std::string summary;            // one line, for logs and outcomes.jsonl
  std::string decision;           // what the attempt sets out to do (the experience memory's decision)
  std::vector<int32_t> context;   // what the policy conditioned on
  std::vector<int32_t> actions;   // what it chose
  double logprob = 0;             // behaviour log-probability of `actions` given `context`
  std::string error;              // why there is no source (an answer without code): a compile_error
};

// One rollout's generation request (a worker's turn holds many).
struct GenerateRequest {
  const Task* task = nullptr;
  Backend backend = Backend::cpu;
  PolicyContext ctx;
  uint64_t seed = 0;
};

struct TrainSample {
  std::vector<int32_t> context, actions;
  double logprob = 0;
  double advantage = 0;
};

struct TrainStats {
  double loss = 0, entropy = 0;
  size_t samples = 0;
  size_t trained = 0;  // samples forwarded with gradients (the LM policy skips zero advantages)
  double kl = 0;  // mean per-token KL to the initial weights (a policy that keeps them; else 0)
  // Mean |log-probability recomputed for training - the one recorded at sampling| per sample: 0
  // when training scores tokens under the distribution they were drawn from (on-policy).
  double behaviour_gap = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string kind() const = 0;
  // Deterministic given (weights, task, context, seed): a resumed run regenerates the same.
  virtual Generation generate(const Task& task, Backend backend, const PolicyContext& ctx, uint64_t seed) = 0;
  // Every request at once, in order; each result is what generate() gives for it alone (a
  // language model decodes them as one batch). Throws if any request fails.
  virtual std::vector<Generation> generate_batch(const std::vector<GenerateRequest>& requests) {
    std::vector<Generation> out;
    for (const auto& r : requests) out.push_back(generate(*r.task, r.backend, r.ctx, r.seed));
    return out;
  }
  // Requests it decodes together at most (0: any number at once): the worker generates a turn in
  // batches of this size and starts compiling each batch while the next one is generated.
  virtual size_t batch_size() const { return 0; }
  // Views of the weights as named tensors (their storage, written in place by a broadcast); empty:
  // the policy moves its weights as the flat vector of weights() / set_weights().
  virtual std::vector<WeightTensor> weight_tensors() { return {}; }
  // Bytes per broadcast bucket of weight_tensors() (0: one bucket).
  virtual size_t broadcast_bucket_bytes() const { return 0; }
  // Copies between its device tensors and the host (nullptr: none are on a device): a channel
  // that moves host memory stages them through it, and their checksum reads them through it.
  virtual const DeviceCopy* device_copy() const { return nullptr; }
  // One update from a batch; the optimizer state is kept between calls.
  virtual TrainStats train(const std::vector<TrainSample>& batch) = 0;
  // Flat weights, for broadcast; empty for a policy without weights.
  virtual std::vector<float> weights() const = 0;
  virtual void set_weights(const std::vector<float>& w) = 0;
  // Weights and optimizer state into / from a folder.
  virtual void save(const std::string& dir) const = 0;
  virtual void load(const std::string& dir) = 0;
  // Tasks it can write, among `tasks`.
  virtual bool can_write(const Task& task, Backend backend) const = 0;
};

// `seed` fixes the initial weights; every rank builds the same policy from it.
std::unique_ptr<Policy> make_policy(const PolicyConfig& cfg, uint64_t seed);

// Checksum of flat weights (identical on every rank after a broadcast).
std::string weights_checksum(const std::vector<float>& w);

struct WeightSync {
  std::string checksum;
  size_t parameters = 0, bytes = 0, buckets = 0;
};
// Collective over `channel`: the root's (the learner's) weights into every other policy, as named
// tensors in buckets where the policy has them and the channel reaches their memory, else as the
// flat vector. Every participant must hold the same kind of policy on the same kind of device.
WeightSync broadcast_policy_weights(Policy& policy, WeightChannel& channel, bool root);

}  // namespace leap
