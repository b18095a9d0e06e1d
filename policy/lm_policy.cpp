// The language-model policy: the whole kernel written as text by a causal LM (lm/), trained with
// a token-level clipped policy gradient (GRPO form: the turn's advantage on each of its tokens).
#include "policy/lm_policy.h"

#include <torch/types.h>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "common/error.h"
#include "common/outcome.h"
#include "common/text.h"
#include "lm/model.h"
#include "lm/safetensors.h"
#include "lm/sft.h"
#include "lm/tokenizer.h"
#include "policy/lm_snapshot.h"
#include "policy/weight_digest.h"
#include "prompt/prompt.h"
#include "prompt/verdict.h"

namespace leap {

namespace {

torch::Device policy_device(const PolicyConfig& cfg) {
  torch::Device d(cfg.device);  // "cpu", "cuda" or "cuda:N" (validated with the config)
  if (d.is_cuda() && !torch::cuda::is_available())
    throw LeapError("[policy] device = \"" + cfg.device + "\", but LibTorch sees no GPU here");
  return d;
}

torch::ScalarType policy_dtype(const PolicyConfig& cfg, const torch::Device& d) {
  if (cfg.dtype == "auto") return d.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
  return cfg.dtype == "bfloat16" ? torch::kBFloat16 : cfg.dtype == "float16" ? torch::kFloat16 : torch::kFloat32;
}

// Bytes between the policy's GPU and the host, through LibTorch (synchronous copies: the host
// buffer is reused as soon as a call returns).
struct TorchDeviceCopy : DeviceCopy {
  explicit TorchDeviceCopy(torch::Device d) : device(d) {}
  torch::Tensor on_device(const void* p, size_t n) const {
    return torch::from_blob(const_cast<void*>(p), {static_cast<int64_t>(n)}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
  }
  static torch::Tensor on_host(const void* p, size_t n) {
    return torch::from_blob(const_cast<void*>(p), {static_cast<int64_t>(n)}, torch::kUInt8);
  }
  void to_host(void* host, const void* dev, size_t n) const override { on_host(host, n).copy_(on_device(dev, n)); }
  void from_host(void* dev, const void* host, size_t n) const override { on_device(dev, n).copy_(on_host(host, n)); }
  std::string device_checksum(const std::vector<WeightTensor>& ts) const override {
    return moments_checksum(ts, device.has_index() ? device.index() : -1);
  }
  torch::Device device;
};

class LmPolicy : public Policy {
 public:
  explicit LmPolicy(const PolicyConfig& cfg)
      : cfg_(cfg),
        device_(policy_device(cfg)),
        dtype_(policy_dtype(cfg, device_)),
        model_(cfg.model, device_, dtype_),
        tok_(cfg.model + "/tokenizer.json"),
        stops_(tok_.stop_ids()) {
    for (auto& [name, t] : model_.parameters()) {
      t.requires_grad_(true);
      params_.push_back(t);
    }
    if (cfg.kl_coef > 0) initial_ = std::make_unique<lm::CausalLM>(cfg.model, device_, dtype_);
  }

  std::string kind() const override { return "lm"; }

  // The prompt tokens of a turn: the task's prompt; a later turn appends the previous answer as
  // the tokens the model generated (decoding and encoding again would not give them back, and a
  // cut character is not text), then leap's verdict as the user's turn.
  std::vector<int64_t> prompt(const Task& task, Backend backend, const PolicyContext& ctx) const {
    auto context =
        tok_.encode(lm::chat_prompt({{"user", prompt::with_memory(prompt::task_prompt(task, backend, cfg_.prompt), ctx.memory)}}));
    if (ctx.turn > 1 && !ctx.prev_actions.empty()) {
      context.insert(context.end(), ctx.prev_actions.begin(), ctx.prev_actions.end());
      const bool closed = std::find(stops_.begin(), stops_.end(), ctx.prev_actions.back()) != stops_.end();
      std::string feedback = clean_text(ctx.prev_feedback, static_cast<size_t>(cfg_.feedback_chars));
      auto next = tok_.encode(prompt::verdict_turn(ctx.prev_status, feedback, closed));
      context.insert(context.end(), next.begin(), next.end());
    }
    return context;
  }

  Generation answer(const std::vector<int64_t>& context, const std::vector<int64_t>& tokens,
                    const std::vector<float>& logprobs) const {
    Generation out;
    out.context.assign(context.begin(), context.end());
    out.actions.assign(tokens.begin(), tokens.end());
    for (float lp : logprobs) out.logprob += lp;
    out.token_logprobs = logprobs;
    if (auto code = prompt::extract_code(tok_.decode(tokens))) {
      out.source = *code;
    } else {
      out.error = prompt::kNoCodeBlock;
    }
    out.summary = std::to_string(out.actions.size()) + " tokens" + (out.error.empty() ? "" : ", no code block");
    out.decision = prompt::prose_of(tok_.decode(tokens));
    return out;
  }

  // The distribution rollouts are sampled from, and the one training scores them under.
  lm::SamplingParams sampling() const {
    lm::SamplingParams sp;
    sp.temperature = cfg_.temperature;
    sp.top_p = cfg_.top_p;
    sp.vocab = tok_.vocab_size();
    return sp;
  }

  Generation generate(const Task& task, Backend backend, const PolicyContext& ctx, uint64_t seed) override {
    return generate_batch({{&task, backend, ctx, seed}}).at(0);
  }

  // Rollouts decoded together, `generate_batch` at a time, each with its own seed (the same
  // tokens as alone); greedy and sampled requests in separate batches.
  size_t batch_size() const override { return static_cast<size_t>(std::max(1, cfg_.generate_batch)); }

  std::vector<Generation> generate_batch(const std::vector<GenerateRequest>& requests) override {
    std::vector<Generation> out(requests.size());
    for (bool greedy : {false, true}) {
      std::vector<size_t> rows;
      for (size_t i = 0; i < requests.size(); ++i)
        if (requests[i].ctx.greedy == greedy) rows.push_back(i);
      const size_t chunk = static_cast<size_t>(std::max(1, cfg_.generate_batch));
      for (size_t at = 0; at < rows.size(); at += chunk) {
        std::vector<std::vector<int64_t>> prompts;
        lm::SamplingParams sp = sampling();
        if (greedy) sp.temperature = 0.0;
        sp.max_new_tokens = cfg_.max_new_tokens;
        sp.stop_tokens = stops_;
        const size_t end = std::min(rows.size(), at + chunk);
        for (size_t k = at; k < end; ++k) {
          const auto& r = requests[rows[k]];
          prompts.push_back(prompt(*r.task, r.backend, r.ctx));
          sp.seeds.push_back(r.seed);
        }
        auto g = model_.generate(prompts, sp);
        for (size_t k = at; k < end; ++k) out[rows[k]] = answer(prompts[k - at], g.tokens[k - at], g.logprobs[k - at]);
      }
    }
    return out;
  }

  // The optimizer, made on first use (only the learner trains). A model in bf16/fp16 trains
  // through fp32 master weights: gradients in the model's dtype are accumulated into the masters,
  // AdamW steps them, and the model takes their rounding; updates smaller than a bf16 step are
  // kept, not lost.
  torch::optim::AdamW& optimizer() const {
    if (opt_) return *opt_;
    std::vector<torch::Tensor> stepped = params_;
    if (dtype_ != torch::kFloat32) {
      torch::NoGradGuard no_grad;
      for (const auto& [name, t] : model_.parameters()) master_[name] = t.detach().to(torch::kFloat32).clone();
      stepped.clear();
      for (auto& [name, m] : master_) stepped.push_back(m);
    }
    opt_ = std::make_unique<torch::optim::AdamW>(stepped, torch::optim::AdamWOptions(cfg_.lr).weight_decay(0.0));
    return *opt_;
  }

  // After backward: the model's gradients into the masters (fp32), the step, the masters' values
  // back into the model. With an fp32 model the optimizer steps the model's own parameters.
  // false, and nothing stepped, where the gradient's norm is not finite: one NaN or Inf anywhere
  // would become NaN in every weight (AdamW's moments too) and in every later generation.
  bool step_optimizer() {
    auto& opt = optimizer();
    if (master_.empty()) {
      if (!std::isfinite(static_cast<double>(torch::nn::utils::clip_grad_norm_(params_, cfg_.grad_clip)))) return false;
      opt.step();
      return true;
    }
    std::vector<torch::Tensor> masters;
    for (auto& [name, t] : model_.parameters()) {
      auto& m = master_.at(name);
      m.mutable_grad() = t.grad().defined() ? t.grad().to(torch::kFloat32) : torch::zeros_like(m);
      masters.push_back(m);
    }
    if (!std::isfinite(static_cast<double>(torch::nn::utils::clip_grad_norm_(masters, cfg_.grad_clip)))) return false;
    opt.step();
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : model_.parameters()) t.copy_(master_.at(name));
    return true;
  }

  // Long: one PPO step read in order (sequences, behaviour log-probs, clipped epochs); its lambdas share the sequences.
  TrainStats train(const std::vector<TrainSample>& batch) override {
    TrainStats st;
    std::vector<const TrainSample*> used;
    for (const auto& s : batch)
      if (!s.actions.empty() && !s.context.empty()) used.push_back(&s);
    st.samples = used.size();
    if (used.empty()) return st;
    // Each sample as one sequence; its generated tokens are the trained positions.
    struct Seq {
      std::vector<int64_t> ids;
      int64_t first;  // position whose next token is the first generated one
      int64_t n;      // generated tokens
      torch::Tensor old_lp;
      torch::Tensor initial_lp;  // under the initial weights (kl_coef > 0)
      double advantage;
      double behaviour;  // the log-probability recorded when it was sampled
      uint32_t staleness;
      const std::vector<float>* behaviour_tokens;  // per token, as sampled (empty: none recorded)
      torch::Tensor weight;  // stale: the truncated behaviour importance weight per token; else undefined
    };
    std::vector<Seq> seqs;
    for (const auto* s : used) {
      std::vector<int64_t> ids(s->context.begin(), s->context.end());
      ids.insert(ids.end(), s->actions.begin(), s->actions.end());
      seqs.push_back({std::move(ids), static_cast<int64_t>(s->context.size()) - 1, static_cast<int64_t>(s->actions.size()),
                      {}, {}, s->advantage, s->logprob, s->staleness, &s->token_logprobs, {}});
    }
    // Sequences of like lengths share a micro-batch (less padding); the loss is a sum over all of
    // them, so the grouping does not change it.
    std::stable_sort(seqs.begin(), seqs.end(), [](const Seq& a, const Seq& b) {
      return std::make_pair(a.ids.size(), a.first) < std::make_pair(b.ids.size(), b.first);
    });
    const size_t mb = static_cast<size_t>(std::max(1, cfg_.micro_batch));
    // `of` in micro-batches of `mb` (consecutive, so of like lengths).
    auto micro_batches = [&](const std::vector<size_t>& of) {
      std::vector<std::vector<size_t>> out;
      for (size_t i = 0; i < of.size(); i += mb) out.emplace_back(of.begin() + i, of.begin() + std::min(of.size(), i + mb));
      return out;
    };
    // Token log-probabilities of the sequences `group` in one right-padded forward (right padding
    // does not change earlier positions): per sequence, its generated tokens' [1, n].
    auto logprobs = [&](const lm::CausalLM& m, const std::vector<size_t>& group, bool checkpoint) {
      size_t T = 0;
      int64_t from = std::numeric_limits<int64_t>::max();
      for (size_t k : group) T = std::max(T, seqs[k].ids.size()), from = std::min(from, seqs[k].first);
      auto ids = torch::zeros({static_cast<int64_t>(group.size()), static_cast<int64_t>(T)}, torch::kLong);
      for (size_t r = 0; r < group.size(); ++r)
        ids[static_cast<int64_t>(r)].narrow(0, 0, static_cast<int64_t>(seqs[group[r]].ids.size()))
            .copy_(torch::tensor(seqs[group[r]].ids, torch::kLong));
      auto lp = m.token_logprobs(ids, checkpoint, from, sampling());
      std::vector<torch::Tensor> out;
      for (size_t r = 0; r < group.size(); ++r)
        out.push_back(lp[static_cast<int64_t>(r)].narrow(0, seqs[group[r]].first - from, seqs[group[r]].n).unsqueeze(0));
      return out;
    };
    std::vector<size_t> all(seqs.size()), trained;
    for (size_t k = 0; k < seqs.size(); ++k) all[k] = k;
    // A sequence whose advantage is 0 adds exactly nothing to the policy term's gradient (a group
    // whose rollouts all tied: all failed, say): without a KL term it is not forwarded at all.
    for (size_t k : all)
      if (seqs[k].advantage != 0 || initial_) trained.push_back(k);
    st.trained = trained.size();
    std::vector<torch::Tensor> neg_lp, kl_sum;  // per sequence, summed once (no device sync per sequence)
    double gap = 0;  // |recomputed - recorded| behaviour log-probability, summed over fresh sequences
    size_t fresh = 0;
    std::vector<torch::Tensor> weights_of_stale;
    {
      torch::NoGradGuard no_grad;  // the behaviour's token log-probabilities: these weights generated them
      for (const auto& group : micro_batches(all)) {
        auto old_lp = logprobs(model_, group, false);
        auto init = initial_ ? logprobs(*initial_, group, false) : std::vector<torch::Tensor>{};
        for (size_t r = 0; r < group.size(); ++r) {
          auto& q = seqs[group[r]];
          q.old_lp = old_lp[r].clone();  // its own storage, not a view of the batch's
          if (initial_) q.initial_lp = init[r].clone();
          neg_lp.push_back(-q.old_lp.sum());  // the entropy statistic: before any update, lp = old_lp
          if (q.staleness > 0) {
            // Older weights sampled it: the clipped ratio is taken against the current weights
            // (old_lp) and the token weighted by pi_current / pi_behaviour, truncated.
            torch::Tensor behaviour;
            if (static_cast<int64_t>(q.behaviour_tokens->size()) == q.n)
              behaviour = torch::tensor(*q.behaviour_tokens, torch::kFloat).to(q.old_lp.options()).view({1, q.n});
            else  // no per-token record: the sequence's, spread evenly
              behaviour = torch::full({1, q.n}, q.behaviour / static_cast<double>(q.n), q.old_lp.options());
            q.weight = torch::exp(q.old_lp - behaviour).clamp_max(cfg_.behaviour_weight_cap);
            weights_of_stale.push_back(q.weight.sum());
            st.stale++;
          }
        }
      }
      const auto recomputed = torch::stack(neg_lp).to(torch::kCPU, torch::kDouble).neg().contiguous();
      for (size_t k = 0; k < seqs.size(); ++k)  // micro_batches(all) visits the sequences in order
        if (seqs[k].staleness == 0) gap += std::abs(recomputed.data_ptr<double>()[k] - seqs[k].behaviour), ++fresh;
    }
    int64_t tokens = 0;
    for (const auto& q : seqs) tokens += q.n;
    double loss_sum = 0;
    auto& opt = optimizer();
    for (int epoch = 0; epoch < std::max(1, cfg_.epochs); ++epoch) {
      opt.zero_grad();
      for (auto& t : params_)
        if (t.grad().defined()) t.mutable_grad().zero_();
      // Per-token normalisation over the whole batch, skipped sequences included (long answers
      // weigh by their length); the gradient accumulates over micro-batches of `micro_batch`
      // sequences, each one forward. The optimizer steps even when nothing was forwarded (its
      // moments carry on, as with a zero gradient).
      for (const auto& group : micro_batches(trained)) {
        auto lps = logprobs(model_, group, cfg_.checkpoint);
        torch::Tensor loss = torch::zeros({}, lps.front().options());
        for (size_t r = 0; r < group.size(); ++r) {
          const auto& q = seqs[group[r]];
          const auto& lp = lps[r];
          auto ratio = torch::exp(lp - q.old_lp);
          auto a = q.advantage;
          auto clipped = torch::clamp(ratio, 1 - cfg_.clip, 1 + cfg_.clip);
          auto term = torch::min(ratio * a, clipped * a);
          if (q.weight.defined()) term = term * q.weight;
          loss = loss - term.sum() / static_cast<double>(tokens);
          if (initial_) {
            // KL(current || initial) per sampled token, the non-negative low-variance estimator
            // e^(init - lp) - (init - lp) - 1 (GRPO's), normalised like the policy term.
            auto d = q.initial_lp - lp;
            auto kl = torch::exp(d) - d - 1;
            loss = loss + cfg_.kl_coef * kl.sum() / static_cast<double>(tokens);
            if (epoch == 0) kl_sum.push_back(kl.sum().detach());
          }
        }
        loss.backward();
        loss_sum += loss.item<double>();
      }
      if (!step_optimizer())
        throw LeapError("the update's gradient is not finite (loss " + std::to_string(loss_sum) + ", epoch " +
                        std::to_string(epoch + 1) + " of " + std::to_string(std::max(1, cfg_.epochs)) +
                        "): that epoch took no step, so no weight holds a NaN");
    }
    auto total = [](const std::vector<torch::Tensor>& v) { return v.empty() ? 0.0 : torch::stack(v).sum().item<double>(); };
    st.loss = loss_sum / std::max(1, cfg_.epochs);
    st.entropy = total(neg_lp) / static_cast<double>(std::max<int64_t>(1, tokens));  // mean -log p of the sampled tokens
    st.kl = total(kl_sum) / static_cast<double>(std::max<int64_t>(1, tokens));
    st.behaviour_gap = gap / static_cast<double>(std::max<size_t>(1, fresh));
    if (st.stale) {
      int64_t stale_tokens = 0;
      for (const auto& q : seqs)
        if (q.staleness > 0) stale_tokens += q.n;
      st.stale_weight = total(weights_of_stale) / static_cast<double>(std::max<int64_t>(1, stale_tokens));
    }
    return st;
  }

  std::vector<float> weights() const override {
    std::vector<float> w;
    for (const auto& [_, t] : model_.parameters()) {
      auto c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
      w.insert(w.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
    return w;
  }

  std::vector<WeightTensor> weight_tensors() override {
    std::vector<WeightTensor> out;
    for (auto& [name, t] : model_.parameters()) {
      if (!t.is_contiguous()) throw LeapError("lm policy: parameter " + name + " is not contiguous");
      const auto st = t.scalar_type();
      const WeightDtype d = st == torch::kFloat32 ? WeightDtype::f32
                            : st == torch::kBFloat16 ? WeightDtype::bf16
                            : st == torch::kFloat16 ? WeightDtype::f16
                                                    : throw LeapError("lm policy: parameter " + name + " has an unsupported dtype");
      out.push_back({name, d, t.sizes().vec(), t.data_ptr(), static_cast<size_t>(t.nbytes()), t.is_cuda()});
    }
    return out;
  }

  size_t broadcast_bucket_bytes() const override { return static_cast<size_t>(cfg_.broadcast_bucket_mb) << 20; }

  const DeviceCopy* device_copy() const override { return device_.is_cuda() ? &copier_ : nullptr; }

  void set_weights(const std::vector<float>& w) override {
    torch::NoGradGuard no_grad;
    size_t at = 0;
    for (auto& [name, t] : model_.parameters()) {
      const auto n = static_cast<size_t>(t.numel());
      if (at + n > w.size()) throw LeapError("lm policy: the weights are shorter than the model");
      t.copy_(torch::from_blob(const_cast<float*>(w.data() + at), t.sizes(), torch::kFloat32).to(t.scalar_type()));
      at += n;
    }
    if (at != w.size()) throw LeapError("lm policy: the weights are longer than the model");
  }

  // The model as Hugging Face loads it (its dtype), the optimizer state beside it, and with a
  // bf16/fp16 model its fp32 masters (master-fp32/), so that a resumed run continues exactly.
  void save(const std::string& dir) const override {
    lm::save_model(model_, cfg_.model, dir);
    torch::save(optimizer(), dir + "/optimizer.pt");
    if (!master_.empty()) {
      std::filesystem::create_directories(dir + "/master-fp32");
      lm::write_safetensors(dir + "/master-fp32/model.safetensors", master_);
    }
  }

  std::unique_ptr<PolicySnapshot> snapshot() const override {
    return snapshot_lm(model_.parameters(), master_, optimizer(), cfg_.model, snapshot_arena_);
  }

  void load(const std::string& dir) override {
    lm::SafetensorsModel ckpt(dir);
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : model_.parameters()) {
      if (!ckpt.contains(name)) throw LeapError(dir + ": the checkpoint has no tensor '" + name + "'");
      t.copy_(ckpt.tensor(name, t.device()).to(t.scalar_type()));
    }
    auto& opt = optimizer();
    if (!master_.empty() && std::filesystem::exists(dir + "/master-fp32/model.safetensors")) {
      lm::SafetensorsModel masters(dir + "/master-fp32");
      for (auto& [name, m] : master_) {
        if (!masters.contains(name)) throw LeapError(dir + "/master-fp32: no tensor '" + name + "'");
        m.copy_(masters.tensor(name, m.device()));
        model_.parameters().at(name).copy_(m);
      }
    }
    if (std::filesystem::exists(dir + "/optimizer.pt")) torch::load(opt, dir + "/optimizer.pt");
  }

  bool can_write(const Task&, Backend) const override { return true; }  // any task it is prompted with

 private:
  PolicyConfig cfg_;
  torch::Device device_;
  TorchDeviceCopy copier_{device_};
  torch::ScalarType dtype_;
  lm::CausalLM model_;
  lm::Tokenizer tok_;
  std::vector<int64_t> stops_;
  std::vector<torch::Tensor> params_;
  // Made on first use (only the learner trains, and only it pays for them).
  mutable std::unique_ptr<torch::optim::AdamW> opt_;
  mutable std::map<std::string, torch::Tensor> master_;  // fp32 masters of a bf16/fp16 model (the learner's)
  mutable SnapshotArena snapshot_arena_;                  // the learner's checkpoint copies, kept between them
  std::unique_ptr<lm::CausalLM> initial_;  // the weights the run started from (kl_coef > 0)
};

}  // namespace

std::unique_ptr<Policy> make_lm_policy(const PolicyConfig& cfg) {
  if (cfg.model.empty()) throw LeapError("[policy] kind = \"lm\" needs model = a Hugging Face folder");
  return std::make_unique<LmPolicy>(cfg);
}

}  // namespace leap
