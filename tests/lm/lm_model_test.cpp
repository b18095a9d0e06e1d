// Parity with Hugging Face transformers on tiny random Qwen2 and Llama models
// (tests/fixtures/lm, made by tools/make_lm_fixtures.py): logits, greedy decoding, and the
// gradient of the sequence log-probability.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "common/error.h"
#include <torch/csrc/autograd/function.h>

#include "lm/model.h"
#include "lm/safetensors.h"
#include "lm/sampling.h"
#include "support/test_util.h"

namespace leap::lm {
namespace {

class LmParity : public ::testing::TestWithParam<std::string> {
 protected:
  std::string dir() const { return test::source_dir() + "/tests/fixtures/lm/" + GetParam(); }
};

TEST_P(LmParity, LogitsMatchTransformers) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  torch::NoGradGuard no_grad;
  auto logits = m.forward(golden.tensor("ids"));
  auto want = golden.tensor("logits");
  ASSERT_EQ(logits.sizes().vec(), want.sizes().vec());
  EXPECT_LT((logits - want).abs().max().item<float>(), 1e-4f);
}

TEST_P(LmParity, GreedyDecodingMatchesTransformers) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  auto ids = golden.tensor("ids").narrow(0, 0, 1);
  auto want = golden.tensor("greedy");
  auto got = m.greedy(ids, want.size(1));
  EXPECT_TRUE(torch::equal(got, want)) << got << "\nvs\n" << want;
}

TEST_P(LmParity, LogprobAndItsGradientMatchTransformers) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  m.requires_grad(true);
  auto lp = m.sequence_logprob(golden.tensor("ids"));
  EXPECT_NEAR(lp.item<float>(), golden.tensor("logprob_sum")[0].item<float>(), 1e-3);
  lp.backward();
  const std::string name = golden.metadata().at("grad_of");
  auto grad = m.parameters().at(name).grad();
  ASSERT_TRUE(grad.defined());
  EXPECT_LT((grad - golden.tensor("grad_q_proj_0")).abs().max().item<float>(), 1e-4f);
}

// Autograd nodes reachable from `t`: what backward holds on to.
size_t graph_nodes(const torch::Tensor& t) {
  std::set<torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> todo = {t.grad_fn().get()};
  while (!todo.empty()) {
    auto* n = todo.back();
    todo.pop_back();
    if (!n || !seen.insert(n).second) continue;
    for (const auto& e : n->next_edges()) todo.push_back(e.function.get());
  }
  return seen.size();
}

TEST_P(LmParity, CheckpointedLayersGiveTheSameGradientsAndKeepNoLayerActivations) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  m.requires_grad(true);
  auto ids = golden.tensor("ids");
  auto plain = m.sequence_logprob(ids);
  const size_t plain_nodes = graph_nodes(plain);
  plain.backward();
  std::map<std::string, torch::Tensor> want;
  for (auto& [name, t] : m.parameters()) {
    ASSERT_TRUE(t.grad().defined()) << name;
    want[name] = t.grad().clone();
    t.mutable_grad().zero_();
  }
  auto ckpt = m.sequence_logprob(ids, /*checkpoint=*/true);
  EXPECT_EQ(ckpt.item<float>(), plain.item<float>());
  // Each decoder layer is one node (its input kept) instead of its ~40 operations and their saved
  // activations.
  const size_t ckpt_nodes = graph_nodes(ckpt);
  EXPECT_LT(ckpt_nodes * 3, plain_nodes) << ckpt_nodes << " nodes checkpointed, " << plain_nodes << " without";
  ckpt.backward();
  for (auto& [name, t] : m.parameters()) {
    ASSERT_TRUE(t.grad().defined()) << name;
    EXPECT_LT((t.grad() - want[name]).abs().max().item<float>(), 1e-5f) << name;
    EXPECT_GT(want[name].abs().max().item<float>(), 0.f) << name << ": no gradient to compare";
  }
  // Without gradients (generation) nothing is checkpointed: the same logits.
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(m.forward(ids, true), m.forward(ids)));
}

std::vector<int64_t> row(const torch::Tensor& ids, int64_t b, int64_t n) {
  auto r = ids[b].narrow(0, 0, n).contiguous();
  return std::vector<int64_t>(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + n);
}

TEST_P(LmParity, CachedGreedyGenerationMatchesTransformersAndRecomputation) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  auto ids = golden.tensor("ids");
  auto want = golden.tensor("greedy");
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = want.size(1);
  auto g = m.generate({row(ids, 0, 12)}, greedy);
  ASSERT_EQ(g.tokens.size(), 1u);
  EXPECT_EQ(g.tokens[0], row(want, 0, want.size(1)));
  EXPECT_EQ(g.finish[0], "length");
  for (float lp : g.logprobs[0]) EXPECT_LE(lp, 0.0f);
  // A batch of prompts of different lengths (left-padded) decodes each as it would alone.
  greedy.max_new_tokens = 10;
  auto batch = m.generate({row(ids, 0, 12), row(ids, 1, 5)}, greedy);
  auto alone = m.generate({row(ids, 1, 5)}, greedy);
  auto recomputed = m.greedy(ids[1].narrow(0, 0, 5).unsqueeze(0), 10);
  EXPECT_EQ(batch.tokens[1], alone.tokens[0]);
  EXPECT_EQ(batch.tokens[1], row(recomputed, 0, 10));
  for (size_t i = 0; i < alone.logprobs[0].size(); ++i)
    EXPECT_NEAR(batch.logprobs[1][i], alone.logprobs[0][i], 1e-4);
}

TEST_P(LmParity, SamplingIsDeterministicGivenASeedAndStopsAtStopTokens) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  auto ids = golden.tensor("ids");
  SamplingParams sp;
  sp.temperature = 1.0;
  sp.top_p = 0.9;
  sp.top_k = 50;
  sp.max_new_tokens = 16;
  sp.seed = 7;
  auto a = m.generate({row(ids, 0, 12), row(ids, 1, 8)}, sp);
  auto b = m.generate({row(ids, 0, 12), row(ids, 1, 8)}, sp);
  EXPECT_EQ(a.tokens, b.tokens);
  sp.seed = 8;
  auto c = m.generate({row(ids, 0, 12), row(ids, 1, 8)}, sp);
  EXPECT_NE(a.tokens, c.tokens);
  SamplingParams top1 = sp;
  top1.top_k = 1;  // one candidate: the greedy choice
  SamplingParams greedy = sp;
  greedy.temperature = 0;
  EXPECT_EQ(m.generate({row(ids, 0, 12)}, top1).tokens, m.generate({row(ids, 0, 12)}, greedy).tokens);
  SamplingParams stop = greedy;
  const int64_t first = m.generate({row(ids, 0, 12)}, greedy).tokens[0][0];
  stop.stop_tokens = {first};
  auto s = m.generate({row(ids, 0, 12)}, stop);
  EXPECT_EQ(s.tokens[0], std::vector<int64_t>{first});
  EXPECT_EQ(s.finish[0], "stop");
}

// A worker generates all its rollouts in one batch: with a seed per prompt, each prompt's tokens
// and log-probabilities are those it gets alone, whatever else is in the batch and where.
TEST_P(LmParity, PerPromptSeedsMakeEachRowOfABatchWhatItIsAlone) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  auto ids = golden.tensor("ids");
  SamplingParams sp;
  sp.temperature = 1.0;
  sp.top_p = 0.95;
  sp.max_new_tokens = 24;
  std::vector<std::vector<int64_t>> prompts = {row(ids, 0, 12), row(ids, 1, 5), row(ids, 0, 7)};
  sp.seeds = {11, 12, 13};
  auto batch = m.generate(prompts, sp);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams one = sp;
    one.seeds = {sp.seeds[i]};
    auto alone = m.generate({prompts[i]}, one);
    EXPECT_EQ(batch.tokens[i], alone.tokens[0]) << "row " << i;
    ASSERT_EQ(batch.logprobs[i].size(), alone.logprobs[0].size());
    for (size_t t = 0; t < alone.logprobs[0].size(); ++t) EXPECT_NEAR(batch.logprobs[i][t], alone.logprobs[0][t], 1e-4);
  }
  // The same rows in another order, with another neighbour: the same answers.
  sp.seeds = {13, 11};
  auto other = m.generate({prompts[2], prompts[0]}, sp);
  EXPECT_EQ(other.tokens[0], batch.tokens[2]);
  EXPECT_EQ(other.tokens[1], batch.tokens[0]);
  EXPECT_NE(batch.tokens[0], batch.tokens[2]);  // the seeds matter
  sp.seeds = {1};
  EXPECT_THROW(m.generate(prompts, sp), LeapError);
}

// Decodes greedy, sampled and early-stopping batches (left-padded prompts of different lengths)
// in `mode` and eagerly: the same tokens, stops and log-probabilities.
void expect_decodes_as_eager(CausalLM& m, const torch::Tensor& ids, Decode mode) {
  std::vector<std::vector<int64_t>> prompts = {row(ids, 0, 12), row(ids, 1, 5), row(ids, 0, 3)};
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = 20;
  SamplingParams sampled;
  sampled.temperature = 1.0;
  sampled.top_p = 0.9;
  sampled.top_k = 40;
  sampled.max_new_tokens = 20;
  sampled.seeds = {3, 4, 5};
  m.set_decode(Decode::eager);
  const auto first = m.generate(prompts, greedy);
  ASSERT_NE(first.tokens[0], first.tokens[1]);  // the rows differ: a mixed-up batch would show
  SamplingParams stopping = greedy;
  stopping.stop_tokens = {first.tokens[1][4]};  // row 1 stops by its fifth token at the latest
  for (const auto* sp : {&greedy, &sampled, &stopping}) {
    m.set_decode(Decode::eager);
    const auto eager = m.generate(prompts, *sp);
    m.set_decode(mode);
    const auto other = m.generate(prompts, *sp);
    EXPECT_EQ(other.tokens, eager.tokens);
    EXPECT_EQ(other.finish, eager.finish);
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(other.logprobs[i].size(), eager.logprobs[i].size());
      for (size_t t = 0; t < eager.logprobs[i].size(); ++t) EXPECT_NEAR(other.logprobs[i][t], eager.logprobs[i][t], 1e-4);
    }
  }
  EXPECT_EQ(m.generate(prompts, stopping).finish[1], "stop");
}

// A prefill in chunks of rows (a budget smaller than one row's scores: a row at a time) fills the
// cache and draws what the whole batch's prefill does, in every decode mode.
TEST_P(LmParity, PrefillInChunksOfRowsDecodesAsOneBatch) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  const auto ids = golden.tensor("ids");
  std::vector<std::vector<int64_t>> prompts = {row(ids, 0, 12), row(ids, 1, 5), row(ids, 0, 3), row(ids, 1, 9)};
  SamplingParams sp;
  sp.temperature = 1.0;
  sp.max_new_tokens = 16;
  sp.seeds = {7, 8, 9, 10};
  for (auto mode : {Decode::eager, Decode::fixed}) {
    m.set_decode(mode);
    m.set_prefill_budget(int64_t{1} << 40);
    const auto whole = m.generate(prompts, sp);
    ASSERT_NE(whole.tokens[0], whole.tokens[1]);  // the rows differ: chunks put back out of order would show
    for (int64_t budget : {int64_t{1}, int64_t{14} * m.config().heads * 12 * 12 * 2}) {  // 1 row, then 2
      m.set_prefill_budget(budget);
      const auto chunked = m.generate(prompts, sp);
      EXPECT_EQ(chunked.tokens, whole.tokens);
      for (size_t i = 0; i < prompts.size(); ++i) {
        ASSERT_EQ(chunked.logprobs[i].size(), whole.logprobs[i].size());
        for (size_t t = 0; t < whole.logprobs[i].size(); ++t) EXPECT_NEAR(chunked.logprobs[i][t], whole.logprobs[i][t], 1e-4);
      }
    }
  }
}

// The step a GPU replays as a CUDA graph (fixed shapes: the whole cache under a mask, inputs
// written in place) decodes what the eager step does.
TEST_P(LmParity, FixedShapeDecodingEqualsEagerDecoding) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  expect_decodes_as_eager(m, golden.tensor("ids"), Decode::fixed);
  if (!cuda_graphs_available()) {  // no CUDA graphs here: said, not ignored
    m.set_decode(Decode::graph);
    EXPECT_THROW(m.generate({row(golden.tensor("ids"), 0, 4)}, SamplingParams{}), LeapError);
  }
}

// On a GPU: the CUDA graph replays (fp32 weights, so the comparison is exact enough to be strict).
TEST_P(LmParity, CudaGraphDecodingEqualsEagerDecodingOnAGpu) {
  if (!cuda_graphs_available()) GTEST_SKIP() << "needs a GPU and a LibTorch built with CUDA";
  CausalLM m(dir(), torch::kCUDA, torch::kFloat32);
  SafetensorsFile golden(dir() + "/golden.safetensors");
  expect_decodes_as_eager(m, golden.tensor("ids"), Decode::graph);
}

// Sampling draws from the model's distribution as tempered and truncated: over many seeds the first
// token's frequencies are its renormalized top-k probabilities, no token outside the top k comes,
// and each reported log-probability is the tempered one.
TEST_P(LmParity, SampledTokensFollowTheTemperedTruncatedDistribution) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  const auto prompt = row(golden.tensor("ids"), 0, 12);
  constexpr double temp = 0.5;
  constexpr int64_t k = 6, n = 3000;
  torch::Tensor logp;
  {
    torch::NoGradGuard no_grad;
    auto ids = torch::tensor(prompt, torch::kLong).unsqueeze(0);
    logp = torch::log_softmax(m.forward(ids).select(1, 11).squeeze(0).to(torch::kDouble) / temp, -1);
  }
  auto [top, top_ids] = logp.exp().topk(k);
  top = top / top.sum();
  SamplingParams sp;
  sp.temperature = temp;
  sp.top_k = k;
  sp.max_new_tokens = 1;
  for (int64_t i = 0; i < n; ++i) sp.seeds.push_back(static_cast<uint64_t>(1000 + i));
  auto g = m.generate(std::vector<std::vector<int64_t>>(n, prompt), sp);
  std::map<int64_t, int64_t> count;
  std::map<int64_t, double> truncated;  // the renormalised top-k distribution sampled from
  for (int64_t j = 0; j < k; ++j) truncated[top_ids[j].item<int64_t>()] = std::log(top[j].item<double>());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(g.tokens[i].size(), 1u);
    const int64_t tok = g.tokens[i][0];
    ++count[tok];
    ASSERT_TRUE(truncated.count(tok)) << "token " << tok << " outside the top k";
    EXPECT_NEAR(g.logprobs[i][0], truncated[tok], 1e-4);  // the distribution sampled from, not the untruncated one
  }
  // Training scores a sampled token under the same distribution (on-policy): token_logprobs with the
  // sampling parameters gives the recorded log-probability; the model's own distribution does not.
  for (int64_t i = 0; i < 3; ++i) {
    torch::NoGradGuard no_grad;
    auto seq = prompt;
    seq.push_back(g.tokens[i][0]);
    auto ids = torch::tensor(seq, torch::kLong).unsqueeze(0);
    const double scored = m.token_logprobs(ids, false, 11, sp)[0][0].item<double>();
    EXPECT_NEAR(scored, g.logprobs[i][0], 1e-4);
    EXPECT_GT(std::abs(m.token_logprobs(ids, false, 11)[0][0].item<double>() - g.logprobs[i][0]), 1e-2);
  }
  int64_t inside = 0;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t tok = top_ids[j].item<int64_t>();
    const double p = top[j].item<double>(), f = static_cast<double>(count[tok]) / n;
    inside += count[tok];
    EXPECT_NEAR(f, p, 5 * std::sqrt(p * (1 - p) / n) + 1e-3) << "token " << tok;
  }
  EXPECT_EQ(inside, n);  // nothing outside the top k
}

// Top-p by hand: probabilities 0.5, 0.3, 0.2 and top_p 0.7 keep the first two (the mass ranked
// above the third is 0.8), renormalised to 0.625 and 0.375; top-k is applied first.
TEST(LmSampling, TruncatedDistributionsAreRenormalised) {
  auto logits = torch::tensor({std::log(0.5), std::log(0.3), std::log(0.2)}, torch::kDouble).unsqueeze(0);
  SamplingParams sp;
  sp.top_p = 0.7;
  auto p = sampling_log_softmax(logits, sp).exp()[0];
  EXPECT_NEAR(p[0].item<double>(), 0.625, 1e-6);
  EXPECT_NEAR(p[1].item<double>(), 0.375, 1e-6);
  EXPECT_EQ(p[2].item<double>(), 0.0);
  sp.top_p = 1.0;
  sp.top_k = 1;
  p = sampling_log_softmax(logits, sp).exp()[0];
  EXPECT_NEAR(p[0].item<double>(), 1.0, 1e-6);
  sp.top_k = 0;
  sp.temperature = 0.5;  // p^2 renormalised: 0.25, 0.09, 0.04 over 0.38
  p = sampling_log_softmax(logits, sp).exp()[0];
  EXPECT_NEAR(p[1].item<double>(), 0.09 / 0.38, 1e-6);
}

// Ids past the tokenizer's vocabulary (a padded embedding) are never drawn, and the log-probabilities
// are those over the ids that may be.
TEST_P(LmParity, SamplingDrawsOnlyFromTheAllowedVocabulary) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  const auto prompt = row(golden.tensor("ids"), 0, 12);
  constexpr int64_t allowed = 7, n = 200;
  SamplingParams sp;
  sp.max_new_tokens = 3;
  sp.vocab = allowed;
  for (int64_t i = 0; i < n; ++i) sp.seeds.push_back(static_cast<uint64_t>(i));
  auto g = m.generate(std::vector<std::vector<int64_t>>(n, prompt), sp);
  torch::Tensor logp;
  {
    torch::NoGradGuard no_grad;
    auto ids = torch::tensor(prompt, torch::kLong).unsqueeze(0);
    logp = torch::log_softmax(m.forward(ids).select(1, 11).squeeze(0).narrow(0, 0, allowed), -1);
  }
  std::set<int64_t> seen;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(g.tokens[i].size(), 3u);
    for (auto t : g.tokens[i]) EXPECT_LT(t, allowed);
    seen.insert(g.tokens[i][0]);
    EXPECT_NEAR(g.logprobs[i][0], logp[g.tokens[i][0]].item<float>(), 1e-4);
  }
  EXPECT_GT(seen.size(), 3u);  // a draw, not one token
}

// Log-probabilities from a position on are those of the whole sequence from there (training asks
// for the answer's only: a prompt's positions need no [T, vocab] logits).
TEST_P(LmParity, TokenLogprobsFromAPositionAreTheWholeSequencesFromThere) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  torch::NoGradGuard no_grad;
  auto ids = golden.tensor("ids");
  const int64_t T = ids.size(1);
  auto all = m.token_logprobs(ids);
  ASSERT_EQ(all.size(1), T - 1);
  for (int64_t from : {int64_t{1}, T / 2, T - 2}) {
    auto part = m.token_logprobs(ids, false, from);
    ASSERT_EQ(part.size(1), T - 1 - from);
    EXPECT_LT((part - all.narrow(1, from, T - 1 - from)).abs().max().item<float>(), 1e-5f) << "from " << from;
  }
  EXPECT_THROW(m.token_logprobs(ids, false, T - 1), LeapError);
  EXPECT_THROW(m.token_logprobs(ids, false, -1), LeapError);
}

// A model whose weights went non-finite does not sample tokens from NaN: generation fails saying so.
TEST_P(LmParity, NonFiniteWeightsFailGenerationWithAClearError) {
  CausalLM m(dir());
  SafetensorsFile golden(dir() + "/golden.safetensors");
  {
    torch::NoGradGuard no_grad;
    m.parameters().at("model.norm.weight")[0] = std::numeric_limits<float>::quiet_NaN();
  }
  for (double temperature : {0.0, 1.0}) {
    SamplingParams sp;
    sp.temperature = temperature;
    sp.max_new_tokens = 4;
    try {
      m.generate({row(golden.tensor("ids"), 0, 12)}, sp);
      FAIL() << "expected an error at temperature " << temperature;
    } catch (const LeapError& e) {
      EXPECT_NE(std::string(e.what()).find("not finite"), std::string::npos) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, LmParity, ::testing::Values("tiny-qwen2", "tiny-llama"));

TEST(LmModel, BadCheckpointsNameWhatIsWrong) {
  test::TempDir d;
  auto error_of = [&] {
    try {
      CausalLM m(d.path());
    } catch (const LeapError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of().find("config.json: cannot read"), std::string::npos);
  std::ofstream(d.path() + "/config.json") << R"({"model_type": "mamba"})";
  EXPECT_NE(error_of().find("model_type 'mamba' is not supported"), std::string::npos);
  std::ofstream(d.path() + "/config.json") << R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 4})";
  EXPECT_NE(error_of().find("'intermediate_size' must be a positive integer"), std::string::npos);
  std::ofstream(d.path() + "/config.json")
      << R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 4, "intermediate_size": 8, "num_hidden_layers": 1,
             "num_attention_heads": 2})";
  write_safetensors(d.path() + "/model.safetensors", {{"model.embed_tokens.weight", torch::zeros({8, 5})}});
  auto e = error_of();
  EXPECT_NE(e.find("'model.embed_tokens.weight' has shape [8, 5]"), std::string::npos) << e;
  write_safetensors(d.path() + "/model.safetensors", {{"model.embed_tokens.weight", torch::zeros({8, 4})}});
  EXPECT_NE(error_of().find("has no tensor 'model.layers.0.input_layernorm.weight'"), std::string::npos);
}

}  // namespace
}  // namespace leap::lm
