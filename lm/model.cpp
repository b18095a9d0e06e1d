#include "lm/model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/version.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#ifdef LEAP_TORCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#endif

#include "common/error.h"
#include "lm/matmul_check.h"
#include "lm/safetensors.h"
#include "lm/sampling.h"

namespace leap::lm {

ModelConfig ModelConfig::load(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path);
  if (!in) throw LeapError(path + ": cannot read");
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw LeapError(path + ": not a JSON object");
  ModelConfig c;
  c.model_type = j.value("model_type", "");
  if (c.model_type != "qwen2" && c.model_type != "llama")
    throw LeapError(path + ": model_type '" + c.model_type + "' is not supported (qwen2, llama)");
  auto integer = [&](const char* key) -> int64_t {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
      throw LeapError(path + ": '" + key + "' must be a positive integer");
    return j[key].get<int64_t>();
  };
  c.vocab = integer("vocab_size");
  c.hidden = integer("hidden_size");
  c.intermediate = integer("intermediate_size");
  c.layers = integer("num_hidden_layers");
  c.heads = integer("num_attention_heads");
  c.kv_heads = j.contains("num_key_value_heads") ? integer("num_key_value_heads") : c.heads;
  c.head_dim = j.contains("head_dim") ? integer("head_dim") : c.hidden / c.heads;
  if (c.heads % c.kv_heads != 0) throw LeapError(path + ": num_attention_heads is not a multiple of num_key_value_heads");
  c.rms_eps = j.value("rms_norm_eps", 1e-6);
  c.rope_theta = j.value("rope_theta", 10000.0);
  c.tied_embeddings = j.value("tie_word_embeddings", false);
  c.qkv_bias = c.model_type == "qwen2" || j.value("attention_bias", false);
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    throw LeapError(path + ": rope_scaling is not supported yet");
  return c;
}

CausalLM::CausalLM(const std::string& dir, torch::Device device, torch::ScalarType dtype)
    : cfg_(ModelConfig::load(dir)), device_(device) {
  SafetensorsModel ckpt(dir);
  auto take = [&](const std::string& name, std::vector<int64_t> shape) {
    if (!ckpt.contains(name)) throw LeapError(dir + ": the checkpoint has no tensor '" + name + "'");
    auto t = ckpt.tensor(name, device).to(dtype).contiguous();
    if (t.sizes().vec() != shape)
      throw LeapError(dir + ": tensor '" + name + "' has shape " + c10::str(t.sizes()) + ", config.json implies " +
                      c10::str(torch::IntArrayRef(shape)));
    w_[name] = t;
  };
  const int64_t H = cfg_.hidden, D = cfg_.head_dim, q = cfg_.heads * D, kv = cfg_.kv_heads * D, I = cfg_.intermediate;
  take("model.embed_tokens.weight", {cfg_.vocab, H});
  for (int64_t l = 0; l < cfg_.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    take(p + "input_layernorm.weight", {H});
    take(p + "post_attention_layernorm.weight", {H});
    take(p + "self_attn.q_proj.weight", {q, H});
    take(p + "self_attn.k_proj.weight", {kv, H});
    take(p + "self_attn.v_proj.weight", {kv, H});
    take(p + "self_attn.o_proj.weight", {H, q});
    if (cfg_.qkv_bias) {
      take(p + "self_attn.q_proj.bias", {q});
      take(p + "self_attn.k_proj.bias", {kv});
      take(p + "self_attn.v_proj.bias", {kv});
    }
    take(p + "mlp.gate_proj.weight", {I, H});
    take(p + "mlp.up_proj.weight", {I, H});
    take(p + "mlp.down_proj.weight", {H, I});
  }
  take("model.norm.weight", {H});
  if (!cfg_.tied_embeddings) take("lm_head.weight", {cfg_.vocab, H});
  check_device_matmuls_once(cfg_, device, dtype);
}

void CausalLM::requires_grad(bool on) {
  for (auto& [_, t] : w_) t.requires_grad_(on);
}

const torch::Tensor& CausalLM::w(const std::string& name) const { return w_.at(name); }

torch::Tensor CausalLM::rms_norm(const torch::Tensor& x, const torch::Tensor& weight) const {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  // PyTorch's operator (one fused kernel on a GPU where it has one, in fp32 inside) instead of the
  // eight element-wise kernels below: a decode step is bound by its kernels' count, not their bytes.
  // It applies the weight before rounding to x's type, Hugging Face after: at most an ulp apart.
  return at::rms_norm(x, {x.size(-1)}, weight, cfg_.rms_eps);
#else
  auto f = x.to(torch::kFloat32);
  f = f * torch::rsqrt(f.pow(2).mean(-1, true) + cfg_.rms_eps);
  return weight * f.to(x.scalar_type());
#endif
}

namespace {

// Rotary embedding: x·cos + rotate_half(x)·sin, where rotate_half(x) = cat(-x2, x1) is roll(x, D/2)
// with the first half negated; the negation sits in `sin_signed` (step's table), so three kernels
// (mul, roll, addcmul) instead of five (neg, cat, two muls, add).
torch::Tensor rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin_signed) {
  return at::addcmul(x * cos, x.roll(x.size(-1) / 2, -1), sin_signed);
}

// x·wᵀ (+ b): with a bias, one GEMM whose epilogue adds it (at::linear) rather than a second kernel.
torch::Tensor proj(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor* b = nullptr) {
  return b ? at::linear(x, w, *b) : torch::matmul(x, w.t());
}

}  // namespace

torch::Tensor CausalLM::forward(const torch::Tensor& ids, bool checkpoint, int64_t logits_from) const {
  auto pos = torch::arange(ids.size(1), torch::TensorOptions().dtype(torch::kLong).device(device_)).expand({ids.size(0), -1});
  return step(ids.to(device_), pos, nullptr, checkpoint, logits_from);
}

torch::Tensor CausalLM::layer(int64_t l, torch::Tensor h, const torch::Tensor& cos, const torch::Tensor& sin,
                              const torch::Tensor& mask, KVCache* cache) const {
  const int64_t B = h.size(0), T = h.size(1), D = cfg_.head_dim, Hq = cfg_.heads, Hkv = cfg_.kv_heads;
  const int64_t start = cache ? cache->len : 0;
  const int64_t L = cache && cache->slot.defined() ? cache->k[l].size(2) : start + T;
  const std::string p = "model.layers." + std::to_string(l) + ".";
  auto x = rms_norm(h, w(p + "input_layernorm.weight"));
  auto bias = [&](const char* n) { return cfg_.qkv_bias ? &w(p + n) : nullptr; };
  auto q = proj(x, w(p + "self_attn.q_proj.weight"), bias("self_attn.q_proj.bias")).view({B, T, Hq, D}).transpose(1, 2);
  auto k = proj(x, w(p + "self_attn.k_proj.weight"), bias("self_attn.k_proj.bias")).view({B, T, Hkv, D}).transpose(1, 2);
  auto v = proj(x, w(p + "self_attn.v_proj.weight"), bias("self_attn.v_proj.bias")).view({B, T, Hkv, D}).transpose(1, 2);
  q = rotary(q, cos, sin);
  k = rotary(k, cos, sin);
  if (cache && cache->slot.defined()) {
    cache->k[l].index_copy_(2, cache->slot, k);
    cache->v[l].index_copy_(2, cache->slot, v);
    k = cache->k[l];
    v = cache->v[l];
  } else if (cache) {
    cache->k[l].narrow(2, start, T).copy_(k);
    cache->v[l].narrow(2, start, T).copy_(v);
    k = cache->k[l].narrow(2, 0, L);
    v = cache->v[l].narrow(2, 0, L);
  }
  torch::Tensor o;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
  if (!cache) {
    // Without a cache the mask is causal (training, scoring): one fused kernel (flash attention on
    // a GPU) instead of [B, heads, T, T] scores materialised in fp32, forward and backward.
    o = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, std::nullopt, /*enable_gqa=*/true)
            .transpose(1, 2)
            .reshape({B, T, Hq * D});
  }
#endif
  if (!o.defined()) {
    // Each KV head serves G = Hq / Hkv consecutive query heads: the group's queries are stacked
    // against their one KV head (no copy of the cache G times per layer and token).
    const int64_t G = Hq / Hkv;
    auto qg = q.reshape({B, Hkv, G * T, D});
    auto scores = torch::matmul(qg, k.transpose(-2, -1)).view({B, Hkv, G, T, L});
    // mask + scores / sqrt(D) in one fp32 kernel (the mask is fp32: type promotion), not three.
    auto logits = at::add(mask.unsqueeze(2), scores, 1.0 / std::sqrt(static_cast<double>(D)));
    auto attn = torch::softmax(logits, -1).to(q.scalar_type());
    o = torch::matmul(attn.view({B, Hkv, G * T, L}), v).view({B, Hq, T, D}).transpose(1, 2).reshape({B, T, Hq * D});
  }
  h = h + proj(o, w(p + "self_attn.o_proj.weight"));
  x = rms_norm(h, w(p + "post_attention_layernorm.weight"));
  auto mlp = torch::silu(proj(x, w(p + "mlp.gate_proj.weight"))) * proj(x, w(p + "mlp.up_proj.weight"));
  return h + proj(mlp, w(p + "mlp.down_proj.weight"));
}

namespace {

// A decoder layer whose activations are not kept: backward runs the layer again (with gradients)
// and differentiates that. The layer's weights are inputs, so their gradients flow as usual. The
// model must outlive the graph (it does: backward runs within the training step).
struct CheckpointedLayer : torch::autograd::Function<CheckpointedLayer> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& h, const torch::Tensor& cos,
                               const torch::Tensor& sin, const torch::Tensor& mask, const CausalLM* model, int64_t l,
                               torch::TensorList weights) {
    ctx->saved_data["model"] = reinterpret_cast<int64_t>(model);
    ctx->saved_data["layer"] = l;
    std::vector<torch::Tensor> keep = {h, cos, sin, mask};
    keep.insert(keep.end(), weights.begin(), weights.end());
    ctx->save_for_backward(keep);
    return model->layer(l, h, cos, sin, mask, nullptr);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    const auto* model = reinterpret_cast<const CausalLM*>(ctx->saved_data["model"].toInt());
    auto h = saved[0].detach().requires_grad_(true);
    torch::autograd::variable_list inputs = {h};
    inputs.insert(inputs.end(), saved.begin() + 4, saved.end());
    torch::Tensor out;
    {
      torch::AutoGradMode on(true);
      out = model->layer(ctx->saved_data["layer"].toInt(), h, saved[1], saved[2], saved[3], nullptr);
    }
    auto grads = torch::autograd::grad({out}, inputs, {grad_out[0]}, false, false, /*allow_unused=*/true);
    // h, cos, sin, mask, model, layer: only h has a gradient; then one per weight.
    torch::autograd::variable_list result = {grads[0], {}, {}, {}, {}, {}};
    result.insert(result.end(), grads.begin() + 1, grads.end());
    return result;
  }
};

}  // namespace

torch::Tensor CausalLM::checkpointed_layer(int64_t l, const torch::Tensor& h, const torch::Tensor& cos,
                                           const torch::Tensor& sin, const torch::Tensor& mask) const {
  std::vector<torch::Tensor> weights;
  const std::string p = "model.layers." + std::to_string(l) + ".";
  for (const auto& [name, t] : w_)
    if (name.compare(0, p.size(), p) == 0 && t.requires_grad()) weights.push_back(t);
  return CheckpointedLayer::apply(h, cos, sin, mask, this, l, torch::TensorList(weights));
}

torch::Tensor CausalLM::step(const torch::Tensor& ids, const torch::Tensor& pos, KVCache* cache, bool checkpoint,
                             int64_t logits_from) const {
  const int64_t B = ids.size(0), T = ids.size(1), D = cfg_.head_dim;
  auto h = w("model.embed_tokens.weight").index_select(0, ids.reshape({-1})).view({B, T, cfg_.hidden});
  // Rotary tables as Hugging Face builds them: inverse frequencies in fp32, cat(freqs, freqs).
  auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
  auto inv_freq = 1.0 / torch::pow(cfg_.rope_theta, torch::arange(0, D, 2, opts) / static_cast<double>(D));
  auto freqs = pos.to(torch::kFloat32).unsqueeze(-1) * inv_freq;  // [B, T, D/2]
  auto emb = torch::cat({freqs, freqs}, -1).unsqueeze(1);          // [B, 1, T, D]
  // sin's first half negated (sin(-f) = -sin(f)): rotate_half's sign, for rotary().
  auto cos = emb.cos().to(h.scalar_type());
  auto sin = torch::cat({-freqs, freqs}, -1).unsqueeze(1).sin().to(h.scalar_type());
  // Query i sits in slot start + i and sees slots <= its own that hold a token.
  const int64_t start = cache ? cache->len : 0, L = start + T;
  const bool fixed = cache && cache->slot.defined();
  auto slots = torch::arange(fixed ? cache->valid.size(1) : L, torch::TensorOptions().dtype(torch::kLong).device(device_));
  torch::Tensor allowed;
  if (fixed) {
    // One query in slot `slot` (a generated token: its slot is valid) over the whole capacity.
    if (T != 1) throw LeapError("a fixed-shape decode step takes one token per row");
    allowed = cache->valid.logical_and(slots.unsqueeze(0) <= cache->slot).unsqueeze(1).unsqueeze(1);  // [B, 1, 1, cap]
  } else {
    allowed = (slots.unsqueeze(0) <= (slots.narrow(0, start, T)).unsqueeze(1)).unsqueeze(0).unsqueeze(0);  // [1, 1, T, L]
  }
  if (cache && !fixed) {
    // A pad's query sees itself only: a row of nothing but -inf would be NaN, and a NaN in a pad
    // slot's value poisons every query through 0 * NaN.
    auto self = slots.unsqueeze(0) == (slots.narrow(0, start, T)).unsqueeze(1);
    allowed = allowed.logical_and(cache->valid.narrow(1, 0, L).unsqueeze(1).unsqueeze(1)).logical_or(self);
  }
  auto mask = torch::zeros(allowed.sizes(), opts).masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
  for (int64_t l = 0; l < cfg_.layers; ++l) {
    if (checkpoint && !cache && torch::GradMode::is_enabled()) h = checkpointed_layer(l, h, cos, sin, mask);
    else h = layer(l, h, cos, sin, mask, cache);
  }
  if (cache && !fixed) cache->len = L;
  // Logits only where they are used (a prompt's prefill: its last; training: the answer's): [B, T, vocab] is GBs.
  if (logits_from > 0) h = h.narrow(1, logits_from, T - logits_from);
  h = rms_norm(h, w("model.norm.weight"));
  return proj(h, w(cfg_.tied_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"));
}

torch::Tensor CausalLM::token_logprobs(const torch::Tensor& ids, bool checkpoint, int64_t from,
                                       const SamplingParams& dist) const {
  const int64_t T = ids.size(1);
  if (from < 0 || from > T - 2) throw LeapError("token_logprobs: position " + std::to_string(from) + " of " + std::to_string(T));
  auto logits = forward(ids, checkpoint, from).narrow(1, 0, T - 1 - from);
  auto targets = ids.narrow(1, from + 1, T - 1 - from).to(device_).unsqueeze(-1);
  return sampling_log_softmax(logits, dist).gather(-1, targets).squeeze(-1).clamp_min(-1e4);
}

torch::Tensor CausalLM::sequence_logprob(const torch::Tensor& ids, bool checkpoint) const {
  return token_logprobs(ids, checkpoint).sum();
}

torch::Tensor CausalLM::greedy(const torch::Tensor& ids, int64_t n) const {
  torch::NoGradGuard no_grad;
  auto seq = ids.to(device_);
  std::vector<torch::Tensor> out;
  for (int64_t i = 0; i < n; ++i) {
    auto next = forward(seq).select(1, seq.size(1) - 1).argmax(-1, true);
    out.push_back(next);
    seq = torch::cat({seq, next}, 1);
  }
  return torch::cat(out, 1);
}

bool cuda_graphs_available() {
#ifdef LEAP_TORCH_CUDA
  return torch::cuda::is_available();
#else
  return false;
#endif
}

int64_t peak_device_memory(torch::Device device) {
#ifdef LEAP_TORCH_CUDA
  if (device.is_cuda()) {
    const auto index = device.has_index() ? device.index() : c10::cuda::current_device();
    return c10::cuda::CUDACachingAllocator::getDeviceStats(index)
        .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
        .peak;
  }
#endif
  (void)device;
  return 0;
}

void reset_peak_device_memory(torch::Device device) {
#ifdef LEAP_TORCH_CUDA
  if (device.is_cuda())
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.has_index() ? device.index() : c10::cuda::current_device());
#endif
  (void)device;
}

Decode CausalLM::decode_mode() const {
  if (decode_ != Decode::automatic) return decode_;
  return device_.is_cuda() && cuda_graphs_available() ? Decode::graph : Decode::eager;
}

// Long: prefill, the decode loop and CUDA-graph replay share the cache, the sampler and the stop state.
Generation CausalLM::generate(const std::vector<std::vector<int64_t>>& prompts, const SamplingParams& sp) const {
  torch::NoGradGuard no_grad;
  const int64_t B = static_cast<int64_t>(prompts.size());
  Generation g;
  g.tokens.resize(prompts.size());
  g.logprobs.resize(prompts.size());
  g.finish.assign(prompts.size(), "length");
  if (B == 0) return g;
  int64_t P = 0;
  for (const auto& p : prompts) {
    if (p.empty()) throw LeapError("generate: an empty prompt");
    for (auto t : p)
      if (t < 0 || t >= cfg_.vocab) throw LeapError("generate: token " + std::to_string(t) + " is outside the vocabulary");
    P = std::max<int64_t>(P, static_cast<int64_t>(p.size()));
  }
  if (!sp.seeds.empty() && sp.seeds.size() != prompts.size())
    throw LeapError("generate: " + std::to_string(sp.seeds.size()) + " seeds for " + std::to_string(B) + " prompts");
  const Decode mode = decode_mode();
  if (mode == Decode::graph && !(device_.is_cuda() && cuda_graphs_available()))
    throw LeapError("generate: CUDA graphs need a CUDA device and a LibTorch built with CUDA");
#ifdef LEAP_TORCH_CUDA
  // A graph is captured on a stream of its own; the whole generation runs there (cache included).
  std::optional<c10::cuda::CUDAStreamGuard> on_side_stream;
  std::optional<at::cuda::CUDAGraph> graph;
  if (mode == Decode::graph) {
    torch::cuda::synchronize(device_.has_index() ? device_.index() : -1);
    on_side_stream.emplace(c10::cuda::getStreamFromPool(false, device_.has_index() ? device_.index() : -1));
  }
#endif
  const auto dtype = w("model.embed_tokens.weight").scalar_type();
  KVCache cache;
  const int64_t cap = P + sp.max_new_tokens;
  for (int64_t l = 0; l < cfg_.layers; ++l) {
    cache.k.push_back(torch::zeros({B, cfg_.kv_heads, cap, cfg_.head_dim}, torch::TensorOptions().dtype(dtype).device(device_)));
    cache.v.push_back(torch::zeros_like(cache.k.back()));
  }
  // Left padding: every prompt ends in slot P - 1; pads are never attended to.
  auto ids = torch::zeros({B, P}, torch::kLong);
  cache.valid = torch::zeros({B, cap}, torch::kBool);
  for (int64_t b = 0; b < B; ++b) {
    const auto& p = prompts[static_cast<size_t>(b)];
    const int64_t off = P - static_cast<int64_t>(p.size());
    for (size_t i = 0; i < p.size(); ++i) ids[b][off + static_cast<int64_t>(i)] = p[i];
    cache.valid[b].narrow(0, off, static_cast<int64_t>(p.size())).fill_(true);
    cache.valid[b].narrow(0, P, sp.max_new_tokens).fill_(true);
  }
  cache.valid = cache.valid.to(device_);
  auto pos = (cache.valid.narrow(1, 0, P).to(torch::kLong).cumsum(1) - 1).clamp_min(0);
  // The prefill's attention holds [rows, heads, P, P] scores in fp32 (with the mask and the
  // probabilities beside them, ~14 bytes an entry): 64 rows of 2,000-token refinement prompts would be
  // ~50 GB. Rows in chunks under the budget bound it; each row's computation is the same.
  const int64_t per_row = 14 * cfg_.heads * P * P;
  const int64_t rows = std::clamp<int64_t>(prefill_budget_ / std::max<int64_t>(per_row, 1), 1, B);
  const auto ids_dev = ids.to(device_);
  std::vector<torch::Tensor> firsts;
  for (int64_t b0 = 0; b0 < B; b0 += rows) {
    const int64_t n = std::min(rows, B - b0);
    KVCache part;  // views of the cache's rows: the prefill writes through them
    for (int64_t l = 0; l < cfg_.layers; ++l) {
      part.k.push_back(cache.k[static_cast<size_t>(l)].narrow(0, b0, n));
      part.v.push_back(cache.v[static_cast<size_t>(l)].narrow(0, b0, n));
    }
    part.valid = cache.valid.narrow(0, b0, n);
    firsts.push_back(step(ids_dev.narrow(0, b0, n), pos.narrow(0, b0, n), &part, false, /*logits_from=*/P - 1).select(1, 0));
  }
  cache.len = P;
  auto logits = firsts.size() == 1 ? firsts[0] : torch::cat(firsts, 0);
  // Every row draws one uniform per step, finished or not: its stream stays its own.
  auto gen = at::detail::createCPUGenerator(sp.seed);
  std::vector<at::Generator> row_gens;
  for (auto s : sp.seeds) row_gens.push_back(at::detail::createCPUGenerator(s));
  // A step's inputs, written in place before each step (a graph reads them there): the previous
  // token, its position, the rows' uniforms; with fixed shapes, the cache slot it goes to.
  auto u_host = torch::empty({B}, torch::kDouble);
  auto u_dev = torch::empty({B}, torch::TensorOptions().dtype(torch::kDouble).device(device_));
  auto draw = [&] {
    auto* u = u_host.data_ptr<double>();
    for (int64_t b = 0; b < B; ++b) u[b] = uniform01(row_gens.empty() ? gen : row_gens[static_cast<size_t>(b)]);
    u_dev.copy_(u_host);
  };
  draw();
  auto out = sample_rows(logits, u_dev, sp);
  auto tok = torch::empty({B, 1}, torch::TensorOptions().dtype(torch::kLong).device(device_));
  auto tok_pos = pos.narrow(1, P - 1, 1).clone();  // advanced before each step
  if (mode != Decode::eager) cache.slot = torch::full({1}, P - 1, torch::TensorOptions().dtype(torch::kLong).device(device_));
  auto next_step = [&] { return sample_rows(step(tok, tok_pos, &cache).select(1, 0), u_dev, sp); };
  torch::Tensor captured;  // the graph's output
  std::vector<bool> done(prompts.size(), false);
  for (int64_t t = 0; t < sp.max_new_tokens; ++t) {
    const auto host = out.to(torch::kCPU);
    const auto a = host.accessor<double, 2>();
    bool all_done = true;
    for (int64_t b = 0; b < B; ++b) {
      const auto i = static_cast<size_t>(b);
      if (done[i]) continue;
      // A non-finite log-probability is a broken model (diverged training), never a token.
      if (!std::isfinite(a[1][b]))
        throw LeapError("generate: the model's log-probabilities are not finite (prompt " + std::to_string(b) + ", token " +
                        std::to_string(t) + "): its weights hold NaN or Inf");
      const auto tok_id = static_cast<int64_t>(a[0][b]);
      g.tokens[i].push_back(tok_id);
      g.logprobs[i].push_back(static_cast<float>(a[1][b]));
      if (std::find(sp.stop_tokens.begin(), sp.stop_tokens.end(), tok_id) != sp.stop_tokens.end()) {
        done[i] = true;
        g.finish[i] = "stop";
      }
      all_done = all_done && done[i];
    }
    if (all_done || t + 1 == sp.max_new_tokens) break;
    tok.copy_(out.select(0, 0).to(torch::kLong).unsqueeze(1));
    tok_pos.add_(1);
    if (cache.slot.defined()) cache.slot.add_(1);
    draw();
#ifdef LEAP_TORCH_CUDA
    if (mode == Decode::graph) {
      if (graph) {
        graph->replay();  // rewrites `captured`
        out = captured;
        continue;
      }
      // The first step runs eagerly (lazy initialisations happen outside the capture, and it is
      // this step's result); the capture only records, for the replays of the steps after it.
      out = next_step();
      graph.emplace();
      graph->capture_begin();
      captured = next_step();
      graph->capture_end();
      continue;
    }
#endif
    out = next_step();
  }
  return g;
}

}  // namespace leap::lm
