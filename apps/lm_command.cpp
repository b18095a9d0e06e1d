// `leap lm generate` and `leap lm score`: try a model folder (config.json, safetensors,
// tokenizer.json) from the command line.
#include <algorithm>
#include <iostream>

#include "apps/commands.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/text.h"
#include "lm/model.h"
#include "lm/tokenizer.h"

namespace leap {
namespace {

torch::Device device_of(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name == "cuda") {
    if (!torch::cuda::is_available()) throw LeapError("--device cuda: no GPU is visible");
    return torch::kCUDA;
  }
  throw LeapError("--device must be cpu or cuda, not '" + name + "'");
}

}  // namespace

int run_lm(const LmArgs& a) {
  const auto device = device_of(a.device);
  const auto dtype = device.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
  lm::CausalLM model(a.model, device, dtype);
  lm::Tokenizer tok(a.model + "/tokenizer.json");
  const std::string text = a.chat ? lm::chat_prompt({{"user", a.text}}) : a.text;
  const auto ids = tok.encode(text);
  if (ids.empty()) throw LeapError("the text is empty");
  if (a.score) {
    if (ids.size() < 2) throw LeapError("score needs at least two tokens");
    torch::NoGradGuard no_grad;
    auto t = torch::tensor(ids, torch::kLong).unsqueeze(0);
    const double lp = model.sequence_logprob(t).item<double>();
    std::cout << "tokens " << ids.size() << "  log-probability " << lp << "  per token " << lp / (ids.size() - 1)
              << std::endl;
    return 0;
  }
  lm::SamplingParams sp;
  sp.temperature = a.temperature;
  sp.top_p = a.top_p;
  sp.top_k = a.top_k;
  sp.max_new_tokens = a.max_tokens;
  sp.stop_tokens = tok.stop_ids();
  sp.vocab = tok.vocab_size();
  for (int64_t i = 0; i < a.batch; ++i) sp.seeds.push_back(a.seed + static_cast<uint64_t>(i));
  if (device.is_cuda()) torch::cuda::synchronize();
  auto t0 = Clock::now();
  auto g = model.generate(std::vector<std::vector<int64_t>>(static_cast<size_t>(a.batch), ids), sp);
  const double s = micros_since(t0) / 1e6;
  std::cout << clean_text(tok.decode(g.tokens[0]), 1 << 30) << std::endl;  // a cut character shown as U+FFFD
  size_t total = 0, longest = 0;
  for (const auto& t : g.tokens) total += t.size(), longest = std::max(longest, t.size());
  std::cerr << "leap lm: " << a.batch << " x up to " << longest << " tokens (" << total << ") in " << s << " s: "
            << total / std::max(s, 1e-9) << " tokens/s, " << longest / std::max(s, 1e-9) << " decode steps/s (prompt "
            << ids.size() << " tokens, " << c10::toString(dtype) << " on " << device.str() << "), row 0 finished by "
            << g.finish[0] << std::endl;
  return 0;
}

}  // namespace leap
