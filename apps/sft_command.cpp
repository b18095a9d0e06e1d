// `leap sft`: supervised fine-tuning of a model folder on kernel sources (the LM policy's warm
// start): every source becomes a chat of its task's prompt and the kernel in a code block.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "agent/prompt.h"
#include "apps/commands.h"
#include "common/error.h"
#include "common/paths.h"
#include "lm/sft.h"

namespace leap {

int run_sft(const SftArgs& a) {
  namespace fs = std::filesystem;
  const Backend backend = *backend_from(a.backend);
  lm::CausalLM model(a.model, torch::kCPU, torch::kFloat32);
  lm::Tokenizer tok(a.model + "/tokenizer.json");
  std::vector<lm::SftExample> data;
  auto add = [&](const std::string& prompt, const std::string& completion) {
    data.push_back(lm::make_example(tok, prompt, completion, static_cast<size_t>(a.max_len)));
  };
  if (fs::is_directory(a.data)) {
    // TASK.anything.cpp|cu (leap tasks render all --all-to DIR writes such names): the kernel of TASK.
    std::map<std::string, Task> tasks;
    for (auto& t : load_suite(a.suite)) tasks.emplace(t.name, std::move(t));
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(a.data))
      if (e.path().extension() == ".cpp" || e.path().extension() == ".cu") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    const std::string fence = backend == Backend::cuda ? "cuda" : "cpp";
    for (const auto& f : files) {
      const std::string name = f.filename().string(), task = name.substr(0, name.find('.'));
      auto it = tasks.find(task);
      if (it == tasks.end()) throw LeapError(f.string() + ": no task '" + task + "' in " + a.suite);
      add(agent::task_prompt(it->second, backend, a.prompt), "```" + fence + "\n" + read_file(f.string()) + "```");
    }
  } else {
    std::ifstream in(a.data);
    if (!in) throw LeapError(a.data + ": cannot read (a folder of sources or a JSONL of prompt/completion)");
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("prompt") || !j.contains("completion") || !j["prompt"].is_string() ||
          !j["completion"].is_string())
        throw LeapError(fmt::format("{}:{}: not a JSON object with string fields prompt and completion", a.data, line_no));
      add(j["prompt"].get<std::string>(), j["completion"].get<std::string>());
    }
  }
  if (data.empty()) throw LeapError(a.data + ": no examples");
  fs::create_directories(a.out);
  std::ofstream log(a.out + "/sft.jsonl");
  lm::SftOptions o;
  o.steps = a.steps;
  o.batch = a.batch;
  o.lr = a.lr;
  o.seed = a.seed;
  o.checkpoint = a.checkpoint;
  auto steps = lm::sft(model, data, o, [&](const lm::SftStep& s) {
    log << nlohmann::json{{"step", s.step}, {"loss", s.loss}, {"grad_norm", s.grad_norm}}.dump() << "\n" << std::flush;
  });
  lm::save_model(model, a.model, a.out);
  fmt::print("leap sft: {} examples, {} steps; loss {:.4f} at the first step, {:.4f} at the last; model in {}\n",
             data.size(), steps.size(), steps.front().loss, steps.back().loss, a.out);
  return 0;
}

}  // namespace leap
