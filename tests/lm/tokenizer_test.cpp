// Parity with Hugging Face tokenizers on a Qwen2-shaped byte-level BPE (NFC, Qwen2's split regex,
// chat tokens) trained by tools/make_lm_fixtures.py: the ids it gave for source files and random
// Unicode text (tests/fixtures/lm/tokenizer/golden.json).
#include "lm/tokenizer.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "support/test_util.h"

namespace leap::lm {
namespace {

const std::string kDir = test::source_dir() + "/tests/fixtures/lm/tokenizer";

// Every golden text of `dir`/golden.json encodes to its ids; `decodes`: and decodes back to the
// text. Returns the tokens seen.
size_t check_golden(const Tokenizer& tok, const std::string& dir, size_t at_least, bool decodes) {
  std::ifstream in(dir + "/golden.json");
  auto golden = nlohmann::json::parse(in);
  EXPECT_GE(golden.size(), at_least);
  size_t tokens = 0;
  for (const auto& g : golden) {
    const auto text = g["text"].get<std::string>();
    auto got = tok.encode(text);
    EXPECT_EQ(got, g["ids"].get<std::vector<int64_t>>()) << "text: " << text.substr(0, 200);
    if (decodes) {
      EXPECT_EQ(tok.decode(got), text) << "text: " << text.substr(0, 200);
    }
    tokens += got.size();
  }
  return tokens;
}

TEST(Tokenizer, EncodesLikeHuggingFaceTokenizers) {
  Tokenizer tok(kDir + "/tokenizer.json");
  EXPECT_GT(check_golden(tok, kDir, 50, false), 5000u);
}

TEST(Tokenizer, DecodeInvertsEncode) {
  Tokenizer tok(kDir + "/tokenizer.json");
  std::ifstream in(kDir + "/golden.json");
  auto golden = nlohmann::json::parse(in);
  for (const auto& g : golden) {  // decode gives the text in its normal form (the tokenizer's NFC)
    const auto text = g["text"].get<std::string>();
    auto* nfc = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(text.c_str()));
    ASSERT_NE(nfc, nullptr);
    EXPECT_EQ(tok.decode(tok.encode(text)), std::string(reinterpret_cast<char*>(nfc)));
    std::free(nfc);
  }
  EXPECT_EQ(tok.decode(tok.encode("cafe\u0301")), "caf\u00e9");
}

TEST(Tokenizer, SpecialTokensAreMatchedWhole) {
  Tokenizer tok(kDir + "/tokenizer.json");
  const int64_t start = tok.token_id("<|im_start|>"), end = tok.token_id("<|im_end|>");
  ASSERT_GE(start, 0);
  auto ids = tok.encode("<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(ids.front(), start);
  EXPECT_EQ(ids.back(), end);
  EXPECT_EQ(tok.decode(ids), "<|im_start|>user\nhi<|im_end|>");
}

TEST(Tokenizer, ChatPromptsFollowQwenChatML) {
  EXPECT_EQ(chat_prompt({{"user", "Write relu."}}),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nWrite relu.<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(chat_prompt({{"system", "S"}, {"user", "U"}, {"assistant", "A"}, {"user", "U2"}}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
            "<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_THROW(chat_prompt({{"tool", "x"}}), LeapError);
  Tokenizer tok(kDir + "/tokenizer.json");
  auto ids = tok.encode(chat_prompt({{"user", "hi"}}));
  EXPECT_EQ(ids.front(), tok.token_id("<|im_start|>"));
}

// Qwen's real vocabulary (151,643 byte-level BPE tokens and the chat tokens; tools/
// make_qwen_vocab_fixture.py from the ranks Qwen ships in tiktoken form, where Hugging Face
// tokenizers and tiktoken agreed on every text): leap gives the same ids, and decodes them back.
TEST(Tokenizer, QwenVocabularyEncodesLikeHuggingFaceAndTiktoken) {
  const std::string dir = test::source_dir() + "/tests/fixtures/lm/qwen-vocab";
  test::TempDir tmp;
  ASSERT_EQ(std::system(("gzip -dc '" + dir + "/tokenizer.json.gz' > '" + tmp.path() + "/tokenizer.json'").c_str()), 0);
  Tokenizer tok(tmp.path() + "/tokenizer.json");
  EXPECT_EQ(tok.vocab_size(), 151646);
  EXPECT_EQ(tok.token_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tok.token_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok.token_id("<|im_end|>"), 151645);
  EXPECT_GT(check_golden(tok, dir, 70, true), 20000u);  // the fixture's texts are NFC: decode gives them back
}

TEST(Tokenizer, UnsupportedFilesAreRefusedWithTheReason) {
  test::TempDir d;
  auto error_of = [&](const std::string& json) {
    std::ofstream(d.path() + "/t.json") << json;
    try {
      Tokenizer t(d.path() + "/t.json");
    } catch (const LeapError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("{").find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"type": "Unigram"}})").find("'Unigram' is not supported"), std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "normalizer": {"type": "NFKC"},
                        "pre_tokenizer": {"type": "ByteLevel"}})").find("normalizer 'NFKC'"), std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "Metaspace"}})")
                .find("pre-tokenizer 'Metaspace'"), std::string::npos);
}

}  // namespace
}  // namespace leap::lm
