// `leap sft`: supervised fine-tuning of a model folder on kernel sources (the LM policy's warm
// start): every source becomes a chat of its task's prompt and the kernel in a code block.
#include <CLI/CLI.hpp>

#include <memory>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "common/error.h"
#include "common/paths.h"
#include "common/text.h"
#include "compile_farm/farm.h"
#include "lm/sft.h"
#include "prompt/prompt.h"
#include "prompt/verdict.h"

namespace leap {

struct SftArgs {
  std::string model, data, out;
  std::string suite = "builtin";
  std::string backend = "cpu";  // the prompts' backend (shapes, fence)
  std::string prompt;           // the prompts' template ([policy] prompt; "" = leap's)
  std::string refine;           // `leap eval` outcomes of --data's sources: second-turn examples
  int feedback_chars = 2000;    // of a verdict's feedback in those ([policy] feedback_chars)
  int steps = 50, batch = 4, max_len = 2048;
  double lr = 1e-3;
  uint64_t seed = 0;
  bool checkpoint = false;
  bool force = false;           // replace a non-empty --out
};

namespace {

// Second-turn examples from `leap eval` outcomes of the sources: each source that failed (any
// verdict but ok and infra_error, which is leap's fault and says nothing of the source), as the
// previous answer with its verdict, then a passing source of the same task, the passing ones taken
// in turn. Returns how many were added.
size_t add_refine_examples(const SftArgs& a, const std::map<std::string, Task>& tasks,
                           const std::map<std::string, std::string>& answers, Backend backend,
                           const lm::Tokenizer& tok, std::vector<lm::SftExample>& data) {
  std::ifstream in(a.refine);
  if (!in) throw LeapError(a.refine + ": cannot read (the JSONL `leap eval --candidates " + a.data + "` wrote)");
  struct Verdict {
    std::string file;
    Status status;
    std::string feedback;
  };
  std::map<std::string, std::vector<std::string>> passing;  // task -> files, in name order
  std::map<std::string, std::vector<Verdict>> failed;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    auto text = [&](const char* k) { return j.is_object() && j.contains(k) && j[k].is_string(); };
    if (!text("candidate") || !text("task") || !text("status"))
      throw LeapError(fmt::format("{}:{}: not a leap eval outcome (string fields candidate, task, status)", a.refine, line_no));
    const std::string file = j["candidate"], task = j["task"];
    const auto status = status_from(j["status"]);
    if (!status)
      throw LeapError(fmt::format("{}:{}: unknown status '{}'", a.refine, line_no, j["status"].get<std::string>()));
    if (!answers.count(file))
      throw LeapError(fmt::format("{}:{}: candidate {} is not a source in {}", a.refine, line_no, file, a.data));
    if (!tasks.count(task)) throw LeapError(fmt::format("{}:{}: no task '{}' in {}", a.refine, line_no, task, a.suite));
    if (*status == Status::ok) {
      passing[task].push_back(file);
    } else if (*status != Status::infra_error) {
      failed[task].push_back({file, *status, text("feedback") ? j["feedback"].get<std::string>() : ""});
    }
  }
  size_t added = 0;
  for (auto& [task, verdicts] : failed) {
    auto& pass = passing[task];
    if (pass.empty()) continue;  // nothing to move to
    std::sort(pass.begin(), pass.end());
    const std::string prompt = prompt::task_prompt(tasks.at(task), backend, a.prompt);
    for (size_t k = 0; k < verdicts.size(); ++k) {
      const auto& v = verdicts[k];
      const std::string verdict = prompt::verdict_turn(
          v.status, clean_text(v.feedback, static_cast<size_t>(a.feedback_chars)), false);
      data.push_back(lm::make_refine_example(tok, prompt, answers.at(v.file), verdict,
                                             answers.at(pass[k % pass.size()]), static_cast<size_t>(a.max_len)));
      ++added;
    }
  }
  if (!added) throw LeapError(a.refine + ": no task has both a failed and a passing source: no second-turn example");
  return added;
}

// Training examples whose kernel does not compile teach the model code that fails: compiled
// through the farm (cached), each failure is named on stderr; training goes on with them.
void warn_uncompilable(const std::vector<std::pair<std::string, std::string>>& answers, Backend backend) {
  CompileConfig cc;
  CompileFarm farm(cc, make_driver(cc, backend));
  std::vector<std::pair<std::string, std::shared_future<CompileResult>>> jobs;
  std::vector<std::string> bad;
  for (const auto& [label, answer] : answers) {
    auto code = prompt::extract_code(answer);
    if (!code) {
      bad.push_back(label + ": no fenced code block with leap_kernel");
      continue;
    }
    jobs.emplace_back(label, farm.submit({label, *code, backend}));
  }
  for (auto& [label, job] : jobs) {
    const auto& r = job.get();
    if (!r.ok) {
      std::string first = r.diagnostics.substr(0, r.diagnostics.find('\n'));
      bad.push_back(label + ": " + first.substr(0, 160));
    }
  }
  if (bad.empty()) return;
  std::cerr << fmt::format("leap sft: warning: {} of {} training examples do not compile; they are trained on as they "
                           "are:\n", bad.size(), answers.size());
  for (size_t i = 0; i < bad.size() && i < 10; ++i) std::cerr << "  " << bad[i] << "\n";
  if (bad.size() > 10) std::cerr << "  ... and " << bad.size() - 10 << " more\n";
}

}  // namespace

static int run_sft(const SftArgs& a) {
  namespace fs = std::filesystem;
  const Backend backend = *backend_from(a.backend);
  if (fs::exists(a.out) && !fs::is_empty(a.out) && !a.force)
    throw LeapError("leap sft: --out " + a.out + " is not empty (a model from an earlier run?): choose another folder, "
                    "or --force to replace what is there");
  lm::CausalLM model(a.model, torch::kCPU, torch::kFloat32);
  lm::Tokenizer tok(a.model + "/tokenizer.json");
  std::vector<lm::SftExample> data;
  std::vector<std::pair<std::string, std::string>> answers_to_check;  // (where it came from, the answer)
  auto add = [&](const std::string& prompt, const std::string& completion) {
    data.push_back(lm::make_example(tok, prompt, completion, static_cast<size_t>(a.max_len)));
  };
  if (!a.refine.empty() && !fs::is_directory(a.data))
    throw LeapError("--refine needs --data to be the folder of the sources that were evaluated");
  size_t refine_examples = 0;
  if (fs::is_directory(a.data)) {
    // TASK.anything.cpp|cu (leap tasks render all --all-to DIR writes such names): the kernel of TASK.
    std::map<std::string, Task> tasks;
    for (auto& t : load_suite(a.suite)) tasks.emplace(t.name, std::move(t));
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(a.data))
      if (e.path().extension() == ".cpp" || e.path().extension() == ".cu") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    const std::string fence = backend == Backend::cuda ? "cuda" : "cpp";
    std::map<std::string, std::string> answers;  // file name -> the answer that writes it
    for (const auto& f : files) {
      const std::string name = f.filename().string(), task = name.substr(0, name.find('.'));
      auto it = tasks.find(task);
      if (it == tasks.end()) throw LeapError(f.string() + ": no task '" + task + "' in " + a.suite);
      answers[name] = "```" + fence + "\n" + read_file(f.string()) + "```";
      add(prompt::task_prompt(it->second, backend, a.prompt), answers[name]);
      answers_to_check.emplace_back(f.string(), answers[name]);
    }
    if (!a.refine.empty()) refine_examples = add_refine_examples(a, tasks, answers, backend, tok, data);
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
      answers_to_check.emplace_back(fmt::format("{}:{}", a.data, line_no), j["completion"].get<std::string>());
    }
  }
  if (data.empty()) throw LeapError(a.data + ": no examples");
  warn_uncompilable(answers_to_check, backend);
  if (a.force) fs::remove_all(a.out);
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
  if (refine_examples) fmt::print("leap sft: {} of the examples are second turns (--refine)\n", refine_examples);
  fmt::print("leap sft: {} examples, {} steps; loss {:.4f} at the first step, {:.4f} at the last; model in {}\n",
             data.size(), steps.size(), steps.front().loss, steps.back().loss, a.out);
  return 0;
}

void add_sft_command(CLI::App& app, Commands& c) {
  auto sf = std::make_shared<SftArgs>();
  auto* sft = app.add_subcommand("sft", "supervised fine-tuning of a model folder on kernel sources (docs/lm.md)");
  sft->add_option("--model", sf->model, "a Hugging Face folder (config.json, safetensors, tokenizer.json)")->required();
  sft->add_option("--data", sf->data, "a folder of TASK.*.cpp|cu sources, or a JSONL of {prompt, completion}")->required();
  sft->add_option("--out", sf->out, "the fine-tuned model's folder (and sft.jsonl); must be empty or new")->required();
  sft->add_flag("--force", sf->force, "replace what a non-empty --out holds");
  sft->add_option("--suite", sf->suite, "the tasks the sources are for")->capture_default_str();
  sft->add_option("--prompt", sf->prompt, "the prompts' template file (the [policy] prompt the model will see)");
  sft->add_option("--backend", sf->backend, "the prompts' backend")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  sft->add_option("--refine", sf->refine,
                  "a `leap eval` JSONL of --data's sources: also train turn 2, each failed source with its verdict "
                  "followed by a passing source of its task");
  sft->add_option("--feedback-chars", sf->feedback_chars, "of a verdict's feedback in turn 2 ([policy] feedback_chars)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  sft->add_option("--steps", sf->steps, "optimizer steps")->capture_default_str();
  sft->add_option("--batch", sf->batch, "examples per step")->capture_default_str();
  sft->add_option("--lr", sf->lr, "AdamW learning rate")->capture_default_str();
  sft->add_option("--max-len", sf->max_len, "tokens per example at most")->capture_default_str();
  sft->add_option("--seed", sf->seed, "example order")->capture_default_str();
  sft->add_flag("--checkpoint", sf->checkpoint, "activation checkpointing");
  c.add(sft, [sf] { return run_sft(*sf); });
}

}  // namespace leap
