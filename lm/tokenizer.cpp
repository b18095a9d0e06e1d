#include "lm/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace leap::lm {

struct Tokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() {
    if (code) pcre2_code_free(code);
  }
};

namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

// Splits a UTF-8 string into its characters (each a string).
std::vector<std::string> chars_of(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

// GPT-2's regex, used by a ByteLevel pre-tokenizer with use_regex = true.
const char* kGpt2Split = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

// Long: tokenizer.json's sections (model, added tokens, pre-tokenizer, normalizer) read in its order.
Tokenizer::Tokenizer(const std::string& path) : split_(std::make_unique<Regex>()) {
  auto fail = [&](const std::string& what) { throw LeapError(path + ": " + what); };
  std::ifstream in(path);
  if (!in) fail("cannot read");
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("not a JSON object");
  const auto& model = j.value("model", nlohmann::json::object());
  if (model.value("type", "") != "BPE") fail("model type '" + model.value("type", "") + "' is not supported (BPE)");
  if (model.value("byte_fallback", false)) fail("byte_fallback BPE (SentencePiece style) is not supported");
  ignore_merges_ = model.value("ignore_merges", false);
  for (const auto& [tok, id] : model.at("vocab").items()) vocab_[tok] = id.get<int64_t>();
  int rank = 0;
  for (const auto& m : model.at("merges")) {
    std::string a, b;
    if (m.is_string()) {
      const auto s = m.get<std::string>();
      const auto sp = s.find(' ');
      if (sp == std::string::npos) fail("merge '" + s + "' is not 'left right'");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2) {
      a = m[0].get<std::string>(), b = m[1].get<std::string>();
    } else {
      fail("a merge is neither 'left right' nor [left, right]");
    }
    merge_rank_.emplace(a + '\x01' + b, rank++);
  }
  for (const auto& t : j.value("added_tokens", nlohmann::json::array())) {
    added_.emplace_back(t.at("content").get<std::string>(), t.at("id").get<int64_t>());
    vocab_[added_.back().first] = added_.back().second;
  }
  std::sort(added_.begin(), added_.end(), [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
  int64_t max_id = -1;
  for (const auto& [_, id] : vocab_) max_id = std::max(max_id, id);
  id_to_token_.assign(static_cast<size_t>(max_id + 1), "");
  is_added_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [tok, id] : vocab_) id_to_token_[static_cast<size_t>(id)] = tok;
  for (const auto& [_, id] : added_) is_added_[static_cast<size_t>(id)] = true;

  const auto& norm = j.value("normalizer", nlohmann::json());
  if (!norm.is_null()) {
    if (norm.value("type", "") != "NFC") fail("normalizer '" + norm.value("type", "") + "' is not supported (NFC)");
    nfc_ = true;
  }
  // The pre-tokenizer: Sequence[Split(regex, Isolated), ByteLevel(use_regex=false)] (Qwen2,
  // Llama 3) or ByteLevel(use_regex=true) (GPT-2).
  std::string pattern;
  const auto& pre = j.value("pre_tokenizer", nlohmann::json());
  auto byte_level = [&](const nlohmann::json& p) {
    if (p.value("add_prefix_space", false)) fail("ByteLevel add_prefix_space is not supported");
    if (p.value("use_regex", true)) pattern = kGpt2Split;
  };
  if (pre.value("type", "") == "ByteLevel") {
    byte_level(pre);
  } else if (pre.value("type", "") == "Sequence") {
    for (const auto& p : pre.at("pretokenizers")) {
      const auto type = p.value("type", "");
      if (type == "Split") {
        if (p.value("behavior", "") != "Isolated" || p.value("invert", false)) fail("only Isolated Split is supported");
        pattern = p.at("pattern").at("Regex").get<std::string>();
      } else if (type == "ByteLevel") {
        byte_level(p);
      } else {
        fail("pre-tokenizer '" + type + "' is not supported");
      }
    }
  } else {
    fail("pre-tokenizer '" + pre.value("type", "") + "' is not supported (ByteLevel, Sequence of Split and ByteLevel)");
  }
  int err = 0;
  PCRE2_SIZE at = 0;
  split_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err,
                               &at, nullptr);
  if (!split_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail("the split regex does not compile at " + std::to_string(at) + ": " + reinterpret_cast<char*>(msg));
  }
  // GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for 256 + n.
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    byte_char_[b] = utf8(printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++));
    char_byte_[byte_char_[b]] = static_cast<uint8_t>(b);
  }
}

Tokenizer::~Tokenizer() = default;

std::string chat_prompt(const std::vector<ChatMessage>& messages, const std::string& default_system) {
  std::string out;
  if (messages.empty() || messages.front().role != "system")
    out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
  for (const auto& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw LeapError("chat: unknown role '" + m.role + "' (system, user, assistant)");
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  return out + "<|im_start|>assistant\n";
}

int64_t Tokenizer::token_id(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

std::vector<int64_t> Tokenizer::stop_ids() const {
  std::vector<int64_t> ids;
  for (const char* stop : {"<|im_end|>", "<|endoftext|>"})
    if (auto id = token_id(stop); id >= 0) ids.push_back(id);
  return ids;
}

void Tokenizer::encode_piece(const std::string& piece, std::vector<int64_t>& out) const {
  if (auto it = cache_.find(piece); it != cache_.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  std::string mapped;
  for (unsigned char c : piece) mapped += byte_char_[c];
  std::vector<int64_t> ids;
  if (ignore_merges_ && vocab_.count(mapped)) {
    ids.push_back(vocab_.at(mapped));
  } else {
    auto parts = chars_of(mapped);
    while (parts.size() > 1) {  // the adjacent pair of lowest rank, leftmost first
      int best = INT_MAX;
      size_t at = 0;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        auto it = merge_rank_.find(parts[i] + '\x01' + parts[i + 1]);
        if (it != merge_rank_.end() && it->second < best) best = it->second, at = i;
      }
      if (best == INT_MAX) break;
      parts[at] += parts[at + 1];
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
    for (const auto& p : parts) {
      auto it = vocab_.find(p);
      if (it == vocab_.end()) throw LeapError("tokenizer: '" + p + "' is in no merge result and not in the vocabulary");
      ids.push_back(it->second);
    }
  }
  out.insert(out.end(), ids.begin(), ids.end());
  if (cache_.size() < 200000) cache_.emplace(piece, std::move(ids));
}

void Tokenizer::encode_text(const std::string& raw, std::vector<int64_t>& out) const {
  if (raw.empty()) return;
  std::string text = raw;
  if (nfc_) {
    utf8proc_uint8_t* nfc = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(raw.c_str()));
    if (!nfc) throw LeapError("tokenizer: the text is not valid UTF-8");
    text = reinterpret_cast<char*>(nfc);
    std::free(nfc);
  }
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(split_->code, nullptr);
  PCRE2_SIZE start = 0, last = 0;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (start <= text.size()) {
    int rc = pcre2_match(split_->code, subject, text.size(), start, 0, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[0] > last) encode_piece(text.substr(last, ov[0] - last), out);  // Isolated: gaps are pieces too
    if (ov[1] > ov[0]) encode_piece(text.substr(ov[0], ov[1] - ov[0]), out);
    last = ov[1];
    if (ov[1] == ov[0]) {  // an empty match: step over one character
      if (ov[1] >= text.size()) break;
      start = ov[1] + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80) ++start;
    } else {
      start = ov[1];
    }
  }
  if (last < text.size()) encode_piece(text.substr(last), out);
  pcre2_match_data_free(md);
}

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int64_t> out;
  size_t from = 0;
  while (from < text.size()) {
    // The earliest added token (the longest where several start there).
    size_t best = std::string::npos;
    const std::pair<std::string, int64_t>* hit = nullptr;
    for (const auto& a : added_) {
      auto p = text.find(a.first, from);
      if (p != std::string::npos && (p < best)) best = p, hit = &a;
    }
    if (!hit) break;
    encode_text(text.substr(from, best - from), out);
    out.push_back(hit->second);
    from = best + hit->first.size();
  }
  encode_text(text.substr(std::min(from, text.size())), out);
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (auto id : ids) {
    if (id < 0 || id >= vocab_size()) throw LeapError("tokenizer: id " + std::to_string(id) + " is outside the vocabulary");
    const auto& tok = id_to_token_[static_cast<size_t>(id)];
    if (is_added_[static_cast<size_t>(id)]) {
      out += tok;
      continue;
    }
    for (const auto& c : chars_of(tok)) {
      auto it = char_byte_.find(c);
      if (it == char_byte_.end()) throw LeapError("tokenizer: token '" + tok + "' holds a character outside the byte map");
      out += static_cast<char>(it->second);
    }
  }
  return out;
}

}  // namespace leap::lm
