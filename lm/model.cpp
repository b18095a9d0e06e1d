#include "lm/model.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "lm/safetensors.h"

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
}

void CausalLM::requires_grad(bool on) {
  for (auto& [_, t] : w_) t.requires_grad_(on);
}

const torch::Tensor& CausalLM::w(const std::string& name) const { return w_.at(name); }

torch::Tensor CausalLM::rms_norm(const torch::Tensor& x, const torch::Tensor& weight) const {
  auto f = x.to(torch::kFloat32);
  f = f * torch::rsqrt(f.pow(2).mean(-1, true) + cfg_.rms_eps);
  return weight * f.to(x.scalar_type());
}

namespace {

torch::Tensor rotate_half(const torch::Tensor& x) {
  const int64_t h = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1);
}

torch::Tensor proj(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor* b = nullptr) {
  auto y = torch::matmul(x, w.t());
  return b ? y + *b : y;
}

}  // namespace

torch::Tensor CausalLM::forward(const torch::Tensor& ids) const {
  const int64_t B = ids.size(0), T = ids.size(1), D = cfg_.head_dim, Hq = cfg_.heads, Hkv = cfg_.kv_heads;
  auto h = w("model.embed_tokens.weight").index_select(0, ids.reshape({-1}).to(device_)).view({B, T, cfg_.hidden});
  // Rotary tables as Hugging Face builds them: inverse frequencies in fp32, cat(freqs, freqs).
  auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
  auto inv_freq = 1.0 / torch::pow(cfg_.rope_theta, torch::arange(0, D, 2, opts) / static_cast<double>(D));
  auto freqs = torch::outer(torch::arange(T, opts), inv_freq);
  auto emb = torch::cat({freqs, freqs}, -1);
  auto cos = emb.cos().to(h.scalar_type()), sin = emb.sin().to(h.scalar_type());
  auto mask = torch::full({T, T}, -std::numeric_limits<float>::infinity(), opts).triu(1);
  for (int64_t l = 0; l < cfg_.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    auto x = rms_norm(h, w(p + "input_layernorm.weight"));
    auto bias = [&](const char* n) { return cfg_.qkv_bias ? &w(p + n) : nullptr; };
    auto q = proj(x, w(p + "self_attn.q_proj.weight"), bias("self_attn.q_proj.bias")).view({B, T, Hq, D}).transpose(1, 2);
    auto k = proj(x, w(p + "self_attn.k_proj.weight"), bias("self_attn.k_proj.bias")).view({B, T, Hkv, D}).transpose(1, 2);
    auto v = proj(x, w(p + "self_attn.v_proj.weight"), bias("self_attn.v_proj.bias")).view({B, T, Hkv, D}).transpose(1, 2);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    k = k.repeat_interleave(Hq / Hkv, 1);  // each KV head serves Hq / Hkv consecutive query heads
    v = v.repeat_interleave(Hq / Hkv, 1);
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(D));
    auto attn = torch::softmax(scores.to(torch::kFloat32) + mask, -1).to(q.scalar_type());
    auto o = torch::matmul(attn, v).transpose(1, 2).reshape({B, T, Hq * D});
    h = h + proj(o, w(p + "self_attn.o_proj.weight"));
    x = rms_norm(h, w(p + "post_attention_layernorm.weight"));
    auto mlp = torch::silu(proj(x, w(p + "mlp.gate_proj.weight"))) * proj(x, w(p + "mlp.up_proj.weight"));
    h = h + proj(mlp, w(p + "mlp.down_proj.weight"));
  }
  h = rms_norm(h, w("model.norm.weight"));
  return proj(h, w(cfg_.tied_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"));
}

torch::Tensor CausalLM::sequence_logprob(const torch::Tensor& ids) const {
  auto logits = forward(ids).narrow(1, 0, ids.size(1) - 1).to(torch::kFloat32);
  auto targets = ids.narrow(1, 1, ids.size(1) - 1).to(device_).unsqueeze(-1);
  return torch::log_softmax(logits, -1).gather(-1, targets).sum();
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

}  // namespace leap::lm
