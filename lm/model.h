// Decoder-only language models of the Qwen2 and Llama families (Hugging Face layout): RMSNorm and
// softmax in fp32, rotary embeddings as Hugging Face computes them (rotate_half), grouped-query
// attention, SwiGLU; weights from a safetensors checkpoint folder with its config.json.
#pragma once
#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

namespace leap::lm {

struct ModelConfig {
  std::string model_type;  // qwen2 | llama
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  double rms_eps = 1e-6, rope_theta = 10000;
  bool tied_embeddings = false;
  bool qkv_bias = false;  // Qwen2: q/k/v projections have biases
  // Reads DIR/config.json; throws LeapError naming the file and the field.
  static ModelConfig load(const std::string& dir);
};

// Sampling of `CausalLM::generate`. temperature 0: greedy. Log-probabilities are recorded under
// the distribution sampled from (lm/sampling.h's sampling_log_softmax: vocabulary cut, temperature,
// top-k/top-p truncation renormalised), the one training scores them under (token_logprobs with
// the same parameters), so the update is on-policy.
struct SamplingParams {
  double temperature = 1.0;
  double top_p = 1.0;         // nucleus: the smallest set of tokens with this much probability
  int64_t top_k = 0;          // 0: all tokens
  int64_t max_new_tokens = 128;
  std::vector<int64_t> stop_tokens;
  // Only ids below this are drawn (0: every row of the model's output). A model's embedding is
  // often padded past its tokenizer's vocabulary; those rows have no text.
  int64_t vocab = 0;
  uint64_t seed = 0;
  // One seed per prompt: each row samples from a generator of its own, so a prompt's tokens do
  // not depend on the others in the batch (a worker batches its rollouts; each stays what it
  // would be alone). Empty: one generator from `seed` for the batch.
  std::vector<uint64_t> seeds;
};

struct Generation {
  std::vector<std::vector<int64_t>> tokens;   // per prompt, the sampled tokens (a stop token included)
  std::vector<std::vector<float>> logprobs;   // per sampled token
  std::vector<std::string> finish;            // "stop" or "length"
};

// Keys and values of every layer, preallocated for a batch: [B, kv_heads, capacity, head_dim].
struct KVCache {
  std::vector<torch::Tensor> k, v;
  int64_t len = 0;
  torch::Tensor valid;  // [B, capacity] bool: the slots a query may attend to (prompts are left-padded)
  // Defined ([1] long, on the cache's device): a decode step of fixed shapes. Its one token goes to
  // this slot and queries attend over the whole capacity under the mask (no shape depends on the
  // step, so a GPU can replay the step as one CUDA graph); `len` is not used.
  torch::Tensor slot;
};

// How `CausalLM::generate` runs its decode steps. automatic: graph on a GPU when LibTorch has CUDA,
// eager elsewhere (on a CPU, attending to the filled slots only is cheaper). fixed: the graph's
// static-shape step without the graph (what the graph replays; for tests on any device).
enum class Decode { automatic, eager, fixed, graph };

// True when this build can capture CUDA graphs (LibTorch built with CUDA).
bool cuda_graphs_available();
// Peak bytes the device's caching allocator has handed out since the last reset; 0 on the CPU.
int64_t peak_device_memory(torch::Device device);
void reset_peak_device_memory(torch::Device device);

class CausalLM {
 public:
  // Weights on `device` in `dtype` (norms and softmax compute in fp32 whatever it is).
  explicit CausalLM(const std::string& dir, torch::Device device = torch::kCPU,
                    torch::ScalarType dtype = torch::kFloat32);
  const ModelConfig& config() const { return cfg_; }
  // Logits [B, T, vocab] of ids [B, T] at positions 0..T-1 (causal); differentiable. `checkpoint`:
  // activation checkpointing, each decoder layer keeps only its input and runs again in backward
  // (memory of one layer's activations instead of all of them, for one more forward's compute).
  // `logits_from`: only positions from there on ([B, T - logits_from, vocab]).
  torch::Tensor forward(const torch::Tensor& ids, bool checkpoint = false, int64_t logits_from = 0) const;
  // Sum over the batch of log p(ids[t] | ids[<t]) for t >= 1: the training objective's term.
  torch::Tensor sequence_logprob(const torch::Tensor& ids, bool checkpoint = false) const;
  // log p(ids[b, t + 1] | ids[b, <= t]) for positions t >= from: [B, T - 1 - from], fp32,
  // differentiable (a loss mask selects the generated tokens; right padding does not change
  // earlier positions; `from`: a prompt's positions need no logits).
  // `dist`: under the distribution `generate` samples from with these parameters (default: the
  // model's own, temperature 1, no truncation). A token outside a truncated distribution (numerics
  // moved it past the nucleus' edge) scores -1e4, not -inf, so ratios stay finite.
  torch::Tensor token_logprobs(const torch::Tensor& ids, bool checkpoint = false, int64_t from = 0,
                               const SamplingParams& dist = {}) const;
  // Decoder layer `l` on hidden states h [B, T, hidden] (rotary cos and sin, sin's first half
  // negated as step() makes it; additive mask; with a cache, attends to its slots and appends).
  torch::Tensor layer(int64_t l, torch::Tensor h, const torch::Tensor& cos, const torch::Tensor& sin,
                      const torch::Tensor& mask, KVCache* cache) const;
  // Greedy continuation of one sequence ids [1, T] by `n` tokens (full recomputation per token).
  torch::Tensor greedy(const torch::Tensor& ids, int64_t n) const;
  // Batched sampling with a preallocated KV cache; prompts of any lengths (left-padded inside).
  Generation generate(const std::vector<std::vector<int64_t>>& prompts, const SamplingParams& params) const;
  void set_decode(Decode d) { decode_ = d; }
  // Bytes the prefill's attention scores may take at once: generate() prefills its rows in chunks
  // under it (a row at least). Long prompts in a wide batch would otherwise need tens of GB.
  void set_prefill_budget(int64_t bytes) { prefill_budget_ = bytes; }
  // How generate() decodes: set_decode's choice, `automatic` resolved (graph or eager).
  Decode decode_mode() const;
  std::map<std::string, torch::Tensor>& parameters() { return w_; }
  const std::map<std::string, torch::Tensor>& parameters() const { return w_; }
  void requires_grad(bool on);

 private:
  const torch::Tensor& w(const std::string& name) const;
  torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight) const;
  // Logits of ids [B, t] at positions pos [B, t] from index `logits_from` on ([B, t - logits_from]);
  // with a cache, attends to its slots and appends.
  torch::Tensor step(const torch::Tensor& ids, const torch::Tensor& pos, KVCache* cache, bool checkpoint = false,
                     int64_t logits_from = 0) const;
  torch::Tensor checkpointed_layer(int64_t l, const torch::Tensor& h, const torch::Tensor& cos, const torch::Tensor& sin,
                                   const torch::Tensor& mask) const;
  ModelConfig cfg_;
  torch::Device device_;
  Decode decode_ = Decode::automatic;
  int64_t prefill_budget_ = int64_t{2} << 30;
  std::map<std::string, torch::Tensor> w_;
};

}  // namespace leap::lm
