// Byte-level BPE tokenizers in Hugging Face's tokenizer.json format (Qwen2, Llama 3, GPT-2
// shapes): NFC normalisation (utf8proc), the pre-tokenizer's split regex (PCRE2: Unicode classes
// and lookahead, which std::regex lacks), byte-to-character mapping, merges by rank, added and
// special tokens matched before anything else.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace leap::lm {

struct ChatMessage {
  std::string role;     // system, user, assistant
  std::string content;
};

// Qwen2.5's chat template (ChatML): every message as <|im_start|>ROLE\nCONTENT<|im_end|>\n, a
// default system message first when there is none, and the assistant's turn opened at the end.
std::string chat_prompt(const std::vector<ChatMessage>& messages,
                        const std::string& default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");

class Tokenizer {
 public:
  // Reads tokenizer.json; throws LeapError naming the file and what is not supported.
  explicit Tokenizer(const std::string& path);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;
  int64_t vocab_size() const { return static_cast<int64_t>(id_to_token_.size()); }
  int64_t token_id(const std::string& token) const;  // -1 if none
  // The ids of the tokens that end a chat answer (<|im_end|>, <|endoftext|>) this vocabulary has.
  std::vector<int64_t> stop_ids() const;

 private:
  void encode_piece(const std::string& piece, std::vector<int64_t>& out) const;
  void encode_text(const std::string& text, std::vector<int64_t>& out) const;  // no added tokens in it

  std::unordered_map<std::string, int64_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, int> merge_rank_;  // "left\x01right"
  std::vector<std::pair<std::string, int64_t>> added_;  // longest first
  std::vector<bool> is_added_;
  bool nfc_ = false, ignore_merges_ = false;
  struct Regex;
  std::unique_ptr<Regex> split_;
  std::string byte_char_[256];
  std::unordered_map<std::string, uint8_t> char_byte_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
};

}  // namespace leap::lm
