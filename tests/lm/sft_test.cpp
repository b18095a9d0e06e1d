// Supervised fine-tuning on the tiny Qwen2 fixture (tests/fixtures/lm/tiny-qwen2): the loss mask
// selects exactly the completion's tokens, padding changes nothing, training lowers the loss and
// the saved folder loads back to the same model.
#include <gtest/gtest.h>

#include <filesystem>

#include "lm/model.h"
#include "lm/sft.h"
#include "lm/tokenizer.h"
#include "support/test_util.h"

namespace leap::lm {
namespace {

const std::string kModel = test::source_dir() + "/tests/fixtures/lm/tiny-qwen2";

TEST(Sft, TheLossCountsOnlyTheCompletionsTokens) {
  CausalLM m(kModel);
  Tokenizer tok(kModel + "/tokenizer.json");
  auto e = make_example(tok, "Write relu.", "```cpp\nint leap_kernel() { return 0; }\n```", 4096);
  const size_t n_prompt = tok.encode(chat_prompt({{"user", "Write relu."}})).size();
  ASSERT_EQ(e.ids.size(), e.train.size());
  for (size_t i = 0; i < e.ids.size(); ++i) EXPECT_EQ(e.train[i], i >= n_prompt ? 1 : 0) << i;
  EXPECT_EQ(e.ids.back(), tok.token_id("<|im_end|>"));
  torch::NoGradGuard no_grad;
  // Independently: log p(token i | tokens < i) as the difference of two prefixes' log-probabilities.
  auto ids = torch::tensor(e.ids, torch::kLong).unsqueeze(0);
  double sum = 0;
  int n = 0;
  for (size_t i = n_prompt; i < e.ids.size(); ++i) {
    auto with = m.sequence_logprob(ids.narrow(1, 0, static_cast<int64_t>(i) + 1)).item<double>();
    auto without = i >= 2 ? m.sequence_logprob(ids.narrow(1, 0, static_cast<int64_t>(i))).item<double>() : 0.0;
    sum += with - without;
    ++n;
  }
  EXPECT_NEAR(masked_nll(m, {&e}).item<double>(), -sum / n, 1e-4);
  // A shorter example beside it (right-padded): the batch's loss is the token-weighted mean.
  auto f = make_example(tok, "Write silu.", "```cpp\nreturn 1;\n```", 4096);
  int nf = 0;
  for (auto t : f.train) nf += t;
  const double both = masked_nll(m, {&e, &f}).item<double>();
  const double alone = (masked_nll(m, {&e}).item<double>() * n + masked_nll(m, {&f}).item<double>() * nf) / (n + nf);
  EXPECT_NEAR(both, alone, 1e-4);
  // Cut at max_len: the first tokens kept, the marks with them.
  auto cut = make_example(tok, "Write relu.", "```cpp\nint leap_kernel() { return 0; }\n```", n_prompt + 3);
  EXPECT_EQ(cut.ids.size(), n_prompt + 3);
  EXPECT_EQ(std::vector<int64_t>(cut.ids.begin(), cut.ids.end()), std::vector<int64_t>(e.ids.begin(), e.ids.begin() + n_prompt + 3));
}

TEST(Sft, TrainingLowersTheLossAndTheSavedFolderLoadsBack) {
  CausalLM m(kModel);
  Tokenizer tok(kModel + "/tokenizer.json");
  std::vector<SftExample> data = {
      make_example(tok, "Write relu.", "```cpp\nfor (i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0;\n```", 512),
      make_example(tok, "Write silu.", "```cpp\nfor (i = 0; i < n; ++i) y[i] = x[i] / (1 + exp(-x[i]));\n```", 512)};
  SftOptions o;
  o.steps = 20;
  o.batch = 2;
  o.lr = 3e-3;
  auto log = sft(m, data, o);
  ASSERT_EQ(log.size(), 20u);
  EXPECT_LT(log.back().loss, 0.6 * log.front().loss) << log.front().loss << " -> " << log.back().loss;
  test::TempDir dir;
  const std::string out = dir.path() + "/tuned";
  save_model(m, kModel, out);
  EXPECT_TRUE(std::filesystem::exists(out + "/config.json"));
  EXPECT_TRUE(std::filesystem::exists(out + "/tokenizer.json"));
  CausalLM back(out);
  torch::NoGradGuard no_grad;
  const double here = masked_nll(m, {&data[0], &data[1]}).item<double>();
  EXPECT_NEAR(masked_nll(back, {&data[0], &data[1]}).item<double>(), here, 1e-5);
  CausalLM original(kModel);  // the fixture itself is untouched (copy-on-write mapping)
  EXPECT_GT(masked_nll(original, {&data[0], &data[1]}).item<double>(), here + 1.0);
}

}  // namespace
}  // namespace leap::lm
