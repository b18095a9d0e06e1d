#include "compile_farm/cuda_split.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>

namespace leap {
namespace {

// The source with comments, string and character literals blanked (newlines kept), so that
// braces, semicolons and keywords are only seen where the compiler sees them.
std::string mask(const std::string& s) {
  std::string m = s;
  size_t i = 0, n = s.size();
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < n; ++k)
      if (m[k] != '\n') m[k] = ' ';
  };
  while (i < n) {
    if (s.compare(i, 2, "//") == 0) {
      size_t e = s.find('\n', i);
      e = e == std::string::npos ? n : e;
      blank(i, e);
      i = e;
    } else if (s.compare(i, 2, "/*") == 0) {
      size_t e = s.find("*/", i + 2);
      e = e == std::string::npos ? n : e + 2;
      blank(i, e);
      i = e;
    } else if (s[i] == '"' || s[i] == '\'') {
      char q = s[i];
      size_t k = i + 1;
      while (k < n && s[k] != q && s[k] != '\n') k += s[k] == '\\' ? 2 : 1;
      if (s.compare(i, 3, "\"C\"") != 0) blank(i + 1, k);  // `extern "C"` stays recognisable
      i = k + 1;
    } else {
      ++i;
    }
  }
  return m;
}

// Whether `word` stands at p in text as a whole identifier.
bool word_at(const std::string& text, size_t p, size_t len) {
  auto ident = [&](size_t k) { return std::isalnum(static_cast<unsigned char>(text[k])) || text[k] == '_'; };
  return (p == 0 || !ident(p - 1)) && (p + len >= text.size() || !ident(p + len));
}

bool has_word(const std::string& text, const std::string& word) {
  for (size_t p = text.find(word); p != std::string::npos; p = text.find(word, p + 1))
    if (word_at(text, p, word.size())) return true;
  return false;
}

// Replaces [from, to) by spaces, keeping newlines (line numbers stay those of the candidate).
void blank_range(std::string& s, size_t from, size_t to) {
  for (size_t k = from; k < to; ++k)
    if (s[k] != '\n') s[k] = ' ';
}

std::string erase_word(std::string text, const std::string& word) {
  for (size_t p = text.find(word); p != std::string::npos; p = text.find(word, p)) {
    if (word_at(text, p, word.size()))
      blank_range(text, p, p + word.size());
    else
      p += word.size();
  }
  return text;
}

// The C++ standard library and the common C headers: host code only in a CUDA candidate.
bool host_only_header(const std::string& h) {
  static const std::set<std::string> c_headers{"stdio.h", "stdlib.h", "string.h", "assert.h"};
  return c_headers.count(h) || (h.find('.') == std::string::npos && h.find('/') == std::string::npos);
}

// A load_inline extension's host code includes PyTorch (and the driver API): its host pass has them.
bool torch_header(const std::string& h) {
  for (const char* prefix : {"torch/", "ATen/", "c10/", "pybind11/"})
    if (h.rfind(prefix, 0) == 0) return true;
  return h == "cuda.h";
}

struct Edit {
  size_t pos, len;
  std::string text;
};

class Splitter {
 public:
  Splitter(const std::string& src, bool torch) : src_(src), m_(mask(src)), torch_(torch) {}

  std::optional<CudaSplit> run(std::string* why) {
    scan(0, m_.size());
    if (!failure_.empty()) {
      if (why) *why = failure_;
      return std::nullopt;
    }
    CudaSplit out;
    out.device_source = apply(device_);
    out.host_source = apply(host_);
    out.kernels.assign(kernels_.begin(), kernels_.end());
    return out;
  }

 private:
  void fail(const std::string& why) {
    if (failure_.empty()) failure_ = why;
  }

  std::string apply(std::vector<Edit> edits) const {
    std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.pos > b.pos; });
    std::string s = src_;
    for (const auto& e : edits) s.replace(e.pos, e.len, e.text);
    return s;
  }

  // Blanks a range in one pass's output (kept as an edit so offsets stay valid).
  static Edit blanked(const std::string& src, size_t from, size_t to) {
    std::string t = src.substr(from, to - from);
    blank_range(t, 0, t.size());
    return {from, to - from, t};
  }

  size_t match_close(size_t open, size_t end) const {
    int depth = 0;
    for (size_t k = open; k < end; ++k) {
      if (m_[k] == '{') ++depth;
      if (m_[k] == '}' && --depth == 0) return k;
    }
    return std::string::npos;
  }

  void preprocessor_line(size_t& pos, size_t end) {
    size_t e = pos;
    for (;;) {
      e = m_.find('\n', e);
      if (e == std::string::npos || e >= end) {
        e = end;
        break;
      }
      if (e > 0 && src_[e - 1] == '\\') {
        ++e;
        continue;
      }
      break;
    }
    static const std::regex include(R"(^#\s*include\s*[<"]([^>"]+)[>"])");
    std::smatch mt;
    std::string line = src_.substr(pos, e - pos);
    if (std::regex_search(line, mt, include)) {
      const std::string h = mt[1].str();
      const auto& ok = nvrtc_supported_headers();
      if (std::find(ok.begin(), ok.end(), h) != ok.end()) {
      } else if (host_only_header(h) || (torch_ && torch_header(h))) {
        device_.push_back(blanked(src_, pos, e));  // for host code only; NVRTC has no such header
      } else {
        fail("includes <" + h + ">");
      }
    }
    pos = e;
  }

  void scan(size_t begin, size_t end) {
    size_t pos = begin;
    while (pos < end && failure_.empty()) {
      while (pos < end && std::isspace(static_cast<unsigned char>(m_[pos]))) ++pos;
      if (pos >= end) break;
      if (m_[pos] == '#') {
        preprocessor_line(pos, end);
        continue;
      }
      if (m_[pos] == ';') {
        ++pos;
        continue;
      }
      size_t start = pos;
      int paren = 0;
      while (pos < end && !(paren == 0 && (m_[pos] == ';' || m_[pos] == '{'))) {
        if (m_[pos] == '(' || m_[pos] == '[') ++paren;
        if (m_[pos] == ')' || m_[pos] == ']') --paren;
        if (m_[pos] == '#' && (pos == 0 || m_[pos - 1] == '\n')) return fail("preprocessor directive inside a declaration");
        ++pos;
      }
      if (pos >= end) return fail("unterminated declaration");
      std::string head = m_.substr(start, pos - start);
      if (m_[pos] == ';') {
        declaration(start, pos + 1, head);
        ++pos;
        continue;
      }
      size_t close = match_close(pos, end);
      if (close == std::string::npos) return fail("unbalanced braces");
      std::string h = std::regex_replace(head, std::regex(R"(\s+)"), " ");
      if (std::regex_search(h, std::regex(R"(^\s*(inline\s+)?namespace\b[^=]*$|^\s*extern "C"\s*$)"))) {
        if (std::regex_search(h, std::regex(R"(^\s*namespace\s*$)"))) {
          // Unnamed: its kernels would get internal linkage (no C name). A named namespace
          // plus a using-directive is what an unnamed namespace means anyway.
          std::string ns = "__leap_unnamed_" + std::to_string(unnamed_++);
          size_t kw = m_.find("namespace", start);
          device_.push_back({kw, 9, "namespace " + ns});
          device_.push_back({close, 1, "} using namespace " + ns + ";"});
        }
        bool outer = c_block_;
        c_block_ = c_block_ || h.find("extern \"C\"") != std::string::npos;
        scan(pos + 1, close);  // namespace or linkage block: its items are items of their own
        c_block_ = outer;
        pos = close + 1;
        continue;
      }
      bool is_type = std::regex_search(h, std::regex(R"(^\s*(template\s*<.*>\s*)?(typedef\s+)?(struct|class|union|enum)\b)"));
      bool is_init = head.find('=') != std::string::npos && head.find('(') == std::string::npos;
      bool is_init_call = !is_type && head.find('(') == std::string::npos;  // `int a[] {1, 2};`
      size_t item_end = close + 1;
      if (is_type || is_init || is_init_call) {
        size_t semi = m_.find(';', close);
        item_end = semi == std::string::npos || semi >= end ? close + 1 : semi + 1;
        declaration(start, item_end, head);
      } else {
        function(start, pos, close, head);
      }
      pos = item_end;
    }
  }

  static bool device_only(const std::string& head) {
    return (has_word(head, "__device__") || has_word(head, "__shared__")) && !has_word(head, "__host__");
  }

  void declaration(size_t start, size_t end, const std::string& head) {
    if (has_word(head, "__constant__") || has_word(head, "__managed__"))
      return fail("__constant__ or __managed__ memory (the host would have to copy to a device symbol)");
    if (has_word(head, "__global__")) return kernel(start, end, end, head, /*definition=*/false);
    if (device_only(head)) return host_.push_back(blanked(src_, start, end));
    // An unannotated function declaration is a host function: not for NVRTC.
    if (!has_word(head, "__host__") && !has_word(head, "__device__") && head.find('(') != std::string::npos &&
        head.find('=') == std::string::npos && !has_word(head, "typedef") && !has_word(head, "using"))
      device_.push_back(blanked(src_, start, end));
  }

  void function(size_t start, size_t open, size_t close, const std::string& head) {
    if (has_word(head, "__constant__") || has_word(head, "__managed__"))
      return fail("__constant__ or __managed__ memory (the host would have to copy to a device symbol)");
    if (has_word(head, "__global__")) return kernel(start, open, close + 1, head, /*definition=*/true);
    if (device_only(head)) {
      host_.push_back(blanked(src_, start, close + 1));
      return;
    }
    if (has_word(head, "__device__")) return launches(open, close);  // __host__ __device__: both passes
    // A host function: NVRTC (JIT mode) accepts none, so the device pass does not see it.
    device_.push_back(blanked(src_, start, close + 1));
    launches(open, close);
  }

  void kernel(size_t start, size_t head_end, size_t item_end, const std::string& head, bool definition) {
    if (has_word(head, "template")) return fail("templated kernel");
    std::string plain = std::regex_replace(head, std::regex(R"(__launch_bounds__\s*\([^)]*\))"), " ");
    size_t paren = plain.find('(');
    if (paren == std::string::npos) return fail("kernel without a parameter list");
    size_t e = paren;
    while (e > 0 && std::isspace(static_cast<unsigned char>(plain[e - 1]))) --e;
    size_t b = e;
    while (b > 0 && (std::isalnum(static_cast<unsigned char>(plain[b - 1])) || plain[b - 1] == '_')) --b;
    std::string name = plain.substr(b, e - b);
    if (name.empty()) return fail("kernel name not found");
    if (definition && !defined_.insert(name).second) return fail("kernel '" + name + "' defined twice (overloads)");
    kernels_.insert(name);
    bool c_linkage = c_block_ || head.find("extern \"C\"") != std::string::npos;
    // Both passes: C linkage (`static` would contradict it), so the host finds the kernel by its
    // plain name. The device pass keeps the body; the host pass only declares the kernel, for the
    // parameter types of the launch rewrite.
    const std::string linked =
        (c_linkage ? "" : "extern \"C\" ") + erase_word(src_.substr(start, head_end - start), "static");
    device_.push_back({start, head_end - start, linked});
    std::string decl = linked;
    if (definition) {
      std::string rest = src_.substr(head_end, item_end - head_end);
      blank_range(rest, 0, rest.size());
      decl += ";" + rest.substr(1);
    }
    host_.push_back({start, item_end - start, decl});
  }

  // k<<<config>>>(args)  ->  __leap_launch<decltype(k)>("k", config)(args)
  // any other use of k    ->  __leap_kernel("k")  (the runtime's handle, e.g. for cudaFuncSetAttribute)
  void launches(size_t open, size_t close) {
    auto ident = [&](size_t k) { return std::isalnum(static_cast<unsigned char>(m_[k])) || m_[k] == '_'; };
    for (size_t p = open; p < close; ++p) {
      if (!ident(p) || (p > 0 && ident(p - 1))) continue;
      size_t e = p;
      while (e < close && ident(e)) ++e;
      std::string name = src_.substr(p, e - p);
      size_t next = e;
      while (next < close && std::isspace(static_cast<unsigned char>(m_[next]))) ++next;
      bool launch = m_.compare(next, 3, "<<<") == 0;
      if (!kernels_.count(name)) {
        if (launch) return fail("launch of '" + name + "', which is not a kernel defined before it");
        p = e - 1;
        continue;
      }
      if (p > 1 && m_.compare(p - 2, 2, "::") == 0) return fail("qualified use of kernel '" + name + "'");
      if (!launch) {
        host_.push_back({p, e - p, "__leap_kernel(\"" + name + "\")"});
        p = e - 1;
        continue;
      }
      size_t q = m_.find(">>>", next + 3);
      if (q == std::string::npos || q > close) return fail("unterminated launch configuration");
      size_t a = q + 3;
      while (a < close && std::isspace(static_cast<unsigned char>(m_[a]))) ++a;
      if (m_[a] != '(') return fail("launch without arguments");
      std::string config = src_.substr(next + 3, q - next - 3);
      host_.push_back({p, q + 3 - p, "__leap_launch<decltype(" + name + ")>(\"" + name + "\"," + config + ")"});
      p = q + 2;
    }
    for (size_t p = m_.find("<<<", open); p != std::string::npos && p < close; p = m_.find("<<<", p + 3)) {
      size_t e = p;
      while (e > open && std::isspace(static_cast<unsigned char>(m_[e - 1]))) --e;
      if (e == open || !ident(e - 1)) return fail("launch of a kernel that is not named directly (template or pointer)");
    }
  }

  const std::string& src_;
  std::string m_;
  std::string failure_;
  std::vector<Edit> device_, host_;
  std::set<std::string> kernels_, defined_;
  bool torch_;
  bool c_block_ = false;  // inside extern "C" { }
  int unnamed_ = 0;
};

}  // namespace

const std::vector<std::string>& nvrtc_supported_headers() {
  static const std::vector<std::string> headers{
      "leap/candidate.h", "dlpack/dlpack.h", "cuda_runtime.h", "cuda_runtime_api.h", "math.h", "cmath",
      "stdint.h", "cstdint", "stddef.h", "cstddef", "float.h", "cfloat", "limits.h", "climits"};
  return headers;
}

std::optional<CudaSplit> split_cuda_source(const std::string& source, std::string* why, bool torch) {
  return Splitter(source, torch).run(why);
}

}  // namespace leap
