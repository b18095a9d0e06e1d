// `leap lm generate` and `leap lm score`: try a model folder (config.json, safetensors,
// tokenizer.json) from the command line; `leap lm bench`: its throughput and memory.
#include <CLI/CLI.hpp>

#include <memory>
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>

#include "apps/commands.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/text.h"
#include "lm/model.h"
#include "lm/tokenizer.h"

namespace leap {

struct LmArgs {
  std::string model;         // folder: config.json, *.safetensors, tokenizer.json
  std::string text;          // the prompt (generate) or the text (score)
  bool score = false;
  bool chat = false;         // wrap the prompt in the chat template (a user turn)
  std::string device = "cpu";
  int64_t max_tokens = 64;
  double temperature = 0;    // 0: greedy
  double top_p = 1;
  int64_t top_k = 0;
  uint64_t seed = 0;
  int64_t batch = 1;         // generate: the prompt this many times in one batch (seeds seed, seed + 1, ...)
  // bench: random prompts of prompt_len tokens, new_tokens each (no stop), then the log-prob
  // forward + backward of train_batch x train_len tokens; one JSON line on stdout.
  bool bench = false;
  int64_t prompt_len = 512, new_tokens = 256, train_batch = 16, train_len = 768;
  std::string decode = "auto";  // auto | eager | graph
};
namespace {

torch::Device device_of(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name == "cuda") {
    if (!torch::cuda::is_available()) throw LeapError("--device cuda: no GPU is visible");
    return torch::kCUDA;
  }
  throw LeapError("--device must be cpu or cuda, not '" + name + "'");
}

void sync(torch::Device d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

// Decode throughput at a batch (the time of `generate` as a worker calls it, prefill included,
// and the prefill alone), the KV cache and peak memory, and the training forward+backward of the
// token log-probabilities (with and without activation checkpointing). One JSON line on stdout.
// Long: load, decode and the training step share the timers and the memory readings of one JSON line.
int run_lm_bench(const LmArgs& a, lm::CausalLM& model, torch::Device device, torch::ScalarType dtype, double load_s) {
  const auto& c = model.config();
  if (a.decode == "eager") model.set_decode(lm::Decode::eager);
  if (a.decode == "graph") model.set_decode(lm::Decode::graph);
  const bool graph = model.decode_mode() == lm::Decode::graph;
  auto gen = at::detail::createCPUGenerator(a.seed);
  auto ids = torch::randint(c.vocab, {a.batch, a.prompt_len}, gen, torch::kLong);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t b = 0; b < a.batch; ++b)
    prompts.emplace_back(ids[b].data_ptr<int64_t>(), ids[b].data_ptr<int64_t>() + a.prompt_len);
  lm::SamplingParams sp;
  sp.temperature = a.temperature;
  sp.top_p = a.top_p;
  sp.top_k = a.top_k;
  for (int64_t b = 0; b < a.batch; ++b) sp.seeds.push_back(a.seed + static_cast<uint64_t>(b));
  auto timed = [&](int64_t n) {
    sp.max_new_tokens = n;
    sync(device);
    const auto t0 = Clock::now();
    auto g = model.generate(prompts, sp);
    sync(device);
    const double s = micros_since(t0) / 1e6;
    for (const auto& t : g.tokens)
      if (static_cast<int64_t>(t.size()) != n) throw LeapError("lm bench: a row stopped early");
    return s;
  };
  timed(std::min<int64_t>(8, a.new_tokens));  // warm-up: kernels, cuBLAS handles, allocator
  const double prefill_s = timed(1);
  lm::reset_peak_device_memory(device);
  const double total_s = timed(a.new_tokens);
  const int64_t peak_generate = lm::peak_device_memory(device);
  const int64_t elem = c10::elementSize(dtype);
  const int64_t kv_bytes = c.layers * 2 * a.batch * c.kv_heads * (a.prompt_len + a.new_tokens) * c.head_dim * elem;
  int64_t params = 0;
  for (const auto& [_, t] : model.parameters()) params += t.numel();
  nlohmann::json j = {{"model", a.model},
                      {"device", device.str()},
                      {"dtype", c10::toString(dtype)},
                      {"decode", graph ? "graph" : "eager"},
                      {"params", params},
                      {"load_s", load_s},
                      {"batch", a.batch},
                      {"prompt_len", a.prompt_len},
                      {"new_tokens", a.new_tokens},
                      {"generate_s", total_s},
                      {"prefill_s", prefill_s},
                      {"tokens_per_s", static_cast<double>(a.batch * a.new_tokens) / total_s},
                      {"decode_steps_per_s", static_cast<double>(a.new_tokens - 1) / std::max(total_s - prefill_s, 1e-9)},
                      {"kv_cache_bytes", kv_bytes},
                      {"peak_generate_bytes", peak_generate}};
  if (a.train_batch > 0) {
    auto train = torch::randint(c.vocab, {a.train_batch, a.train_len}, gen, torch::kLong).to(device);
    model.requires_grad(true);
    for (bool checkpoint : {false, true}) {
      const std::string key = checkpoint ? "logprob_fwd_bwd_checkpointed" : "logprob_fwd_bwd";
      try {
        auto once = [&] {
          for (auto& [_, t] : model.parameters()) t.mutable_grad() = torch::Tensor();
          model.token_logprobs(train, checkpoint).sum().backward();
        };
        once();  // warm-up
        lm::reset_peak_device_memory(device);
        sync(device);
        const auto t0 = Clock::now();
        once();
        sync(device);
        j[key + "_s"] = micros_since(t0) / 1e6;
        j[key + "_peak_bytes"] = lm::peak_device_memory(device);
        bool finite = true;  // a kernel that misbehaves on this card or share of it shows here, not as a time
        for (auto& [_, t] : model.parameters())
          if (t.grad().defined()) finite = finite && t.grad().isfinite().all().item<bool>();
        j[key + "_grad_finite"] = finite;
      } catch (const c10::Error& e) {  // out of memory at this size: said in the table
        j[key + "_error"] = std::string(e.what_without_backtrace()).substr(0, 200);
      }
      for (auto& [_, t] : model.parameters()) t.mutable_grad() = torch::Tensor();
    }
    {
      torch::NoGradGuard no_grad;
      j["logprob_finite"] = model.token_logprobs(train, false).isfinite().all().item<bool>();
    }
    j["train_tokens"] = a.train_batch * a.train_len;
    model.requires_grad(false);
  }
  std::cout << j.dump() << std::endl;
  std::cerr << "leap lm bench: " << a.batch << " x " << a.new_tokens << " tokens in " << total_s << " s ("
            << j["tokens_per_s"].get<double>() << " tokens/s, " << (graph ? "CUDA graph" : "eager") << "), prefill "
            << prefill_s << " s" << std::endl;
  return 0;
}

}  // namespace

static int run_lm(const LmArgs& a) {
  const auto device = device_of(a.device);
  const auto dtype = device.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
  const auto load0 = Clock::now();
  lm::CausalLM model(a.model, device, dtype);
  if (a.bench) {
    sync(device);
    return run_lm_bench(a, model, device, dtype, micros_since(load0) / 1e6);
  }
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
  sync(device);
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

void add_lm_command(CLI::App& app, Commands& c) {
  auto la = std::make_shared<LmArgs>();
  auto* lm = app.add_subcommand("lm", "the language-model engine: try a model folder (docs/lm.md)");
  lm->require_subcommand(1);
  auto* generate = lm->add_subcommand("generate", "continue a prompt");
  auto* score = lm->add_subcommand("score", "the log-probability of a text");
  for (auto* sub : {generate, score}) {
    sub->add_option("--model", la->model, "folder with config.json, safetensors and tokenizer.json")->required();
    sub->add_option("--device", la->device, "cpu or cuda")->capture_default_str();
    sub->add_flag("--chat", la->chat, "wrap the text in the chat template as a user turn");
  }
  generate->add_option("--prompt", la->text, "the prompt")->required();
  score->add_option("--text", la->text, "the text")->required();
  generate->add_option("--max-tokens", la->max_tokens, "tokens to generate at most")->capture_default_str();
  generate->add_option("--temperature", la->temperature, "0: greedy")->capture_default_str();
  generate->add_option("--top-p", la->top_p, "nucleus sampling")->capture_default_str();
  generate->add_option("--top-k", la->top_k, "0: all tokens")->capture_default_str();
  generate->add_option("--seed", la->seed, "sampling seed")->capture_default_str();
  generate->add_option("--batch", la->batch, "decode the prompt this many times together (seeds --seed, --seed + 1, ...): throughput at a worker's batch size")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));

  auto* lm_bench = lm->add_subcommand(
      "bench", "decode throughput, memory and the training forward+backward of a model folder (JSON on stdout; bench/lm_bench.py)");
  lm_bench->add_option("--model", la->model, "folder with config.json and safetensors")->required();
  lm_bench->add_option("--device", la->device, "cpu or cuda")->capture_default_str();
  lm_bench->add_option("--batch", la->batch, "prompts decoded together")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{4096}));
  lm_bench->add_option("--prompt-len", la->prompt_len, "tokens per prompt (random ids)")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  lm_bench->add_option("--new-tokens", la->new_tokens, "tokens generated per prompt (no stop)")->capture_default_str()->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  lm_bench->add_option("--train-batch", la->train_batch, "sequences in the log-prob forward+backward (0: none)")->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{4096}));
  lm_bench->add_option("--train-len", la->train_len, "tokens per training sequence")->capture_default_str()->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  lm_bench->add_option("--decode", la->decode, "decode steps: auto (a CUDA graph on a GPU), eager, graph")
      ->check(CLI::IsMember({"auto", "eager", "graph"}))->capture_default_str();
  lm_bench->add_option("--temperature", la->temperature, "0: greedy")->capture_default_str();
  lm_bench->add_option("--top-p", la->top_p, "nucleus sampling")->capture_default_str();
  lm_bench->add_option("--top-k", la->top_k, "0: all tokens")->capture_default_str();
  lm_bench->add_option("--seed", la->seed, "prompts and sampling seed")->capture_default_str();
  for (auto* sub : {generate, score, lm_bench})
    c.add(sub, [la, sub, score, lm_bench] {
      la->score = sub == score;
      la->bench = sub == lm_bench;
      return run_lm(*la);
    });
}

}  // namespace leap
