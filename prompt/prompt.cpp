#include "prompt/prompt.h"

#include <map>
#include <sstream>

#include "common/error.h"
#include "common/paths.h"
#include "common/text.h"

namespace leap::prompt {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void replace_all(std::string& s, const std::string& key, const std::string& value) {
  for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + value.size())) s.replace(at, key.size(), value);
}

}  // namespace

std::string with_memory(const std::string& user, const std::string& context) {
  if (context.empty()) return user;
  // Cases keep what candidates and models wrote, invalid UTF-8 included; a prompt is text.
  return user + "\n\nWhat earlier attempts at this and related tasks showed (leap's experience memory):\n\n" +
         clean_text(context, std::string::npos) +
         "\nImprove on the best attempt, avoid the failures above, and reply with the complete kernel.";
}

std::string task_prompt(const Task& t, Backend backend, const std::string& template_path) {
  std::string p = read_file(template_path.empty() ? data_dir() + "/python/leap_client/prompts/candidate_abi.md" : template_path);
  auto tensors = [&](const std::vector<TensorDecl>& ts) {
    std::string s;
    for (const auto& d : ts)
      s += "- `" + d.name + "`: " + to_string(d.dtype) + " " + shape_text(t.shape(d, backend)) +
           (d.parameter.empty() ? "" : " (module parameter)") + "\n";
    return s;
  };
  const bool cuda = backend == Backend::cuda;
  const std::map<std::string, std::string> fields = {
      {"{language}", cuda ? "CUDA, compiled with nvcc" : "C++17, compiled with g++ -O3"},
      {"{name}", t.name},
      {"{level}", std::to_string(t.level)},
      {"{description}", t.description},
      {"{inputs}", tensors(t.inputs)},
      {"{outputs}", tensors(t.outputs)},
      {"{torch_code}", t.torch_code.empty() ? "(none)" : t.torch_code},
      {"{fence}", cuda ? "cuda" : "cpp"}};
  for (const auto& [k, v] : fields) replace_all(p, k, v);  // not a format string: the C++ has braces
  return p;
}

std::optional<std::string> extract_code(const std::string& answer) {
  std::vector<std::string> blocks;
  std::istringstream in(answer);
  std::string line, block;
  bool inside = false;
  while (std::getline(in, line)) {
    auto first = line.find_first_not_of(" \t");
    bool fence = first != std::string::npos && line.compare(first, 3, "```") == 0;
    if (fence) {
      if (inside) blocks.push_back(block);
      else block.clear();
      inside = !inside;
    } else if (inside) {
      block += line + "\n";
    }
  }
  if (inside && !block.empty()) blocks.push_back(block);  // an answer cut off inside its block
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
    if (it->find("leap_kernel") != std::string::npos) return *it;
  if (!blocks.empty()) return blocks.back();
  return std::nullopt;
}

std::string prose_of(const std::string& answer, size_t max_bytes) {
  std::string prose;
  bool in_code = false;
  size_t at = 0;
  while (at <= answer.size()) {
    size_t end = answer.find('\n', at);
    if (end == std::string::npos) end = answer.size();
    std::string line = answer.substr(at, end - at);
    at = end + 1;
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 3, "```") == 0) {
      in_code = !in_code;
      continue;
    }
    if (in_code) continue;
    for (char ch : line) {
      const bool space = ch == ' ' || ch == '\t' || ch == '\r';
      if (space && (prose.empty() || prose.back() == ' ')) continue;
      prose += space ? ' ' : ch;
    }
    if (!prose.empty() && prose.back() != ' ') prose += ' ';
  }
  while (!prose.empty() && prose.back() == ' ') prose.pop_back();
  return clean_text(prose, max_bytes);
}

}  // namespace leap::prompt
