#include "lm/sft.h"

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>

#include "common/error.h"
#include "lm/safetensors.h"

namespace leap::lm {

namespace {

// `context` (not trained), then the completion and its end token (trained); cut at `max_len`.
SftExample with_completion(const Tokenizer& tok, std::vector<int64_t> context, const std::string& completion,
                           size_t max_len) {
  SftExample e;
  e.ids = std::move(context);
  e.train.assign(e.ids.size(), 0);
  auto tail = tok.encode(completion + "<|im_end|>");
  e.ids.insert(e.ids.end(), tail.begin(), tail.end());
  e.train.insert(e.train.end(), tail.size(), 1);
  if (e.ids.size() > max_len) {
    e.ids.resize(max_len);
    e.train.resize(max_len);
  }
  return e;
}

}  // namespace

SftExample make_example(const Tokenizer& tok, const std::string& prompt, const std::string& completion, size_t max_len) {
  // The prompt up to the assistant's opening; the completion after it.
  return with_completion(tok, tok.encode(chat_prompt({{"user", prompt}})), completion, max_len);
}

SftExample make_refine_example(const Tokenizer& tok, const std::string& prompt, const std::string& answer,
                               const std::string& verdict,
                               const std::string& completion, size_t max_len) {
  std::vector<int64_t> context;
  for (const std::string& piece : {chat_prompt({{"user", prompt}}), answer, verdict}) {
    auto ids = tok.encode(piece);
    context.insert(context.end(), ids.begin(), ids.end());
  }
  return with_completion(tok, std::move(context), completion, max_len);
}

torch::Tensor masked_nll(const CausalLM& model, const std::vector<const SftExample*>& batch, bool checkpoint) {
  if (batch.empty()) throw LeapError("sft: an empty batch");
  size_t T = 0;
  for (const auto* e : batch) T = std::max(T, e->ids.size());
  if (T < 2) throw LeapError("sft: examples need at least two tokens");
  const auto B = static_cast<int64_t>(batch.size());
  auto ids = torch::zeros({B, static_cast<int64_t>(T)}, torch::kLong);
  auto mask = torch::zeros({B, static_cast<int64_t>(T)}, torch::kFloat32);
  for (int64_t b = 0; b < B; ++b) {
    const auto& e = *batch[static_cast<size_t>(b)];
    const auto n = static_cast<int64_t>(e.ids.size());
    ids[b].narrow(0, 0, n).copy_(torch::tensor(e.ids, torch::kLong));
    std::vector<float> m(e.train.begin(), e.train.end());
    mask[b].narrow(0, 0, n).copy_(torch::tensor(m));
  }
  // Position t predicts token t + 1: a token is trained when it is marked (padding never is).
  // Logits from the position before the batch's first trained token on (a prompt needs none).
  int64_t first = static_cast<int64_t>(T) - 1;
  for (const auto* e : batch)
    for (size_t i = 1; i < e->train.size(); ++i)
      if (e->train[i]) {
        first = std::min(first, static_cast<int64_t>(i));
        break;
      }
  const int64_t from = first - 1;
  auto lp = model.token_logprobs(ids, checkpoint, from);
  auto m = mask.narrow(1, from + 1, static_cast<int64_t>(T) - 1 - from).to(lp.device());
  auto n = m.sum();
  if (n.item<float>() == 0) throw LeapError("sft: no trained token in the batch");
  return -(lp * m).sum() / n;
}

std::vector<SftStep> sft(CausalLM& model, const std::vector<SftExample>& data, const SftOptions& o,
                         const std::function<void(const SftStep&)>& on_step) {
  if (data.empty()) throw LeapError("sft: no examples");
  if (o.steps < 1 || o.batch < 1 || o.lr <= 0) throw LeapError("sft: steps, batch and lr must be positive");
  model.requires_grad(true);
  std::vector<torch::Tensor> params;
  for (auto& [_, t] : model.parameters()) params.push_back(t);
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));
  std::mt19937_64 rng(o.seed);
  std::vector<size_t> order(data.size());
  std::iota(order.begin(), order.end(), 0);
  size_t next = order.size();  // reshuffled at every pass over the data
  std::vector<SftStep> log;
  for (int step = 0; step < o.steps; ++step) {
    std::vector<const SftExample*> batch;
    while (static_cast<int>(batch.size()) < std::min<int>(o.batch, static_cast<int>(data.size()))) {
      if (next == order.size()) {
        std::shuffle(order.begin(), order.end(), rng);
        next = 0;
      }
      batch.push_back(&data[order[next++]]);
    }
    opt.zero_grad();
    auto loss = masked_nll(model, batch, o.checkpoint);
    loss.backward();
    const double norm = torch::nn::utils::clip_grad_norm_(params, o.clip);
    opt.step();
    log.push_back({step, loss.item<double>(), norm});
    if (on_step) on_step(log.back());
  }
  model.requires_grad(false);
  return log;
}

void save_model(const CausalLM& model, const std::string& from_dir, const std::string& out_dir) {
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& [name, t] : model.parameters()) tensors[name] = t.detach().to(torch::kCPU);
  save_model_tensors(tensors, from_dir, out_dir);
}

void save_model_tensors(const std::map<std::string, torch::Tensor>& tensors, const std::string& from_dir,
                        const std::string& out_dir) {
  namespace fs = std::filesystem;
  fs::create_directories(out_dir);
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    if (fs::exists(fs::path(from_dir) / f) && fs::absolute(from_dir) != fs::absolute(out_dir))
      fs::copy_file(fs::path(from_dir) / f, fs::path(out_dir) / f, fs::copy_options::overwrite_existing);
  fs::remove(fs::path(out_dir) / "model.safetensors.index.json");  // one file now, not shards
  const std::string tmp = out_dir + "/model.safetensors.partial";
  write_safetensors(tmp, tensors, {{"format", "pt"}});
  fs::rename(tmp, out_dir + "/model.safetensors");  // a reader never sees half a file
}

}  // namespace leap::lm
