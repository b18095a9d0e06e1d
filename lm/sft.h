// Supervised fine-tuning (`leap sft`): plain token cross-entropy on kernel sources, the warm start
// of the LM policy before RL. An example is a chat: the task's prompt (user) and a kernel in a code
// block (assistant); only the assistant's tokens are trained (the loss mask).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lm/model.h"
#include "lm/tokenizer.h"

namespace leap::lm {

struct SftExample {
  std::vector<int64_t> ids;
  std::vector<uint8_t> train;  // per token: 1 = predicted and trained, 0 = context only
};

// The chat (prompt as the user's turn, completion as the assistant's, ended by <|im_end|>) in
// tokens, the completion's tokens marked for training; cut at `max_len` tokens.
SftExample make_example(const Tokenizer& tok, const std::string& prompt, const std::string& completion, size_t max_len);

// A second-turn example: the task's prompt, a previous `answer` (context), leap's `verdict` turn
// on it (prompt::verdict_turn, the answer not closed), then `completion` (trained). Encoded in the
// pieces the policy encodes (prompt, answer, verdict), so the trained context is token for token
// what the policy's turn 2 sees; cut at `max_len`.
SftExample make_refine_example(const Tokenizer& tok, const std::string& prompt, const std::string& answer,
                               const std::string& verdict,
                               const std::string& completion, size_t max_len);

// Mean negative log-likelihood of the trained tokens of `batch` (right-padded into one tensor),
// differentiable.
torch::Tensor masked_nll(const CausalLM& model, const std::vector<const SftExample*>& batch, bool checkpoint = false);

struct SftOptions {
  int steps = 50;
  int batch = 4;
  double lr = 1e-3;
  double weight_decay = 0.0;
  double clip = 1.0;        // gradient norm bound
  uint64_t seed = 0;        // example order
  bool checkpoint = false;  // activation checkpointing
};

struct SftStep {
  int step;
  double loss, grad_norm;
};

// AdamW over every parameter of `model` (trained in place); `on_step` sees each step's loss.
std::vector<SftStep> sft(CausalLM& model, const std::vector<SftExample>& data, const SftOptions& o,
                         const std::function<void(const SftStep&)>& on_step = nullptr);

// A Hugging Face folder of `model`: config.json and tokenizer.json copied from `from_dir`,
// model.safetensors written (the same names and dtype it was loaded with).
void save_model(const CausalLM& model, const std::string& from_dir, const std::string& out_dir);
// The same folder from the model's tensors by name (host copies, e.g. a snapshot taken earlier).
void save_model_tensors(const std::map<std::string, torch::Tensor>& tensors, const std::string& from_dir,
                        const std::string& out_dir);

}  // namespace leap::lm
