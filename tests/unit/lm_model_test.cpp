// Parity with Hugging Face transformers on tiny random Qwen2 and Llama models
// (tests/fixtures/lm, made by tools/make_lm_fixtures.py): logits, greedy decoding, and the
// gradient of the sequence log-probability.
#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "lm/model.h"
#include "lm/safetensors.h"
#include "test_util.h"

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
