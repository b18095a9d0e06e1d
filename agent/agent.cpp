#include "agent/agent.h"

#include <torch/cuda.h>

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "common/outcome.h"
#include "common/paths.h"
#include "common/text.h"
#include "evaluation/eval_pipeline.h"
#include "lm/model.h"
#include "lm/tokenizer.h"
#include "memory/memory.h"

namespace leap::agent {

namespace {

using json = nlohmann::json;

const std::regex& url_re() {
  static const std::regex re(R"(^(http://[^/]+)(/.*)?$)");
  return re;
}

void check_url(const std::string& url) {
  if (!std::regex_match(url, url_re()))
    throw LeapError("agent: endpoint '" + url + "' is not an http:// URL (put a local proxy before an https one)");
}

}  // namespace

Completion complete(const EndpointOptions& e, const std::vector<Message>& messages) {
  check_url(e.url);
  std::smatch m;
  std::regex_match(e.url, m, url_re());
  std::string prefix = m[2].matched ? m[2].str() : "";
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  const std::string path = prefix.size() >= 17 && prefix.compare(prefix.size() - 17, 17, "/chat/completions") == 0
                               ? prefix
                               : (prefix.size() >= 3 && prefix.compare(prefix.size() - 3, 3, "/v1") == 0 ? prefix : prefix + "/v1") +
                                     "/chat/completions";
  httplib::Client cli(m[1].str());
  cli.set_connection_timeout(std::chrono::milliseconds(static_cast<int64_t>(std::min(e.timeout_s, 10.0) * 1000)));
  cli.set_read_timeout(std::chrono::milliseconds(static_cast<int64_t>(e.timeout_s * 1000)));
  cli.set_write_timeout(std::chrono::milliseconds(static_cast<int64_t>(e.timeout_s * 1000)));
  std::string key = e.api_key;
  for (const char* var : {"LEAP_AGENT_API_KEY", "OPENAI_API_KEY"})
    if (key.empty() && std::getenv(var)) key = std::getenv(var);
  httplib::Headers headers;
  if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
  json msgs = json::array();
  for (const auto& msg : messages) msgs.push_back({{"role", msg.role}, {"content", msg.content}});
  const std::string body = json{{"model", e.model},
                                {"messages", msgs},
                                {"temperature", e.temperature},
                                {"max_tokens", e.max_tokens}}
                               .dump(-1, ' ', false, json::error_handler_t::replace);
  Completion c;
  double wait = e.backoff_s;
  for (int attempt = 0; attempt <= e.retries; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      wait *= 2;
    }
    ++c.attempts;
    auto res = cli.Post(path, headers, body, "application/json");
    if (!res) {
      c.error = "no answer from " + e.url + path + ": " + httplib::to_string(res.error());
      continue;
    }
    if (res->status == 429 || res->status >= 500) {
      c.error = "HTTP " + std::to_string(res->status) + " from " + e.url + path;
      if (res->status == 429 && res->has_header("Retry-After")) {
        double after = std::atof(res->get_header_value("Retry-After").c_str());
        wait = std::clamp(after, 0.0, 30.0);
      }
      continue;
    }
    if (res->status != 200) {  // the request itself is wrong (model name, key): retrying cannot help
      c.error = "HTTP " + std::to_string(res->status) + " from " + e.url + path + ": " + res->body.substr(0, 300);
      return c;
    }
    auto j = json::parse(res->body, nullptr, false);
    if (j.is_discarded() || !j.contains("choices") || !j["choices"].is_array() || j["choices"].empty() ||
        !j["choices"][0].contains("message") || !j["choices"][0]["message"].contains("content") ||
        !j["choices"][0]["message"]["content"].is_string()) {
      c.error = "a malformed answer from " + e.url + path + ": " + res->body.substr(0, 200);
      continue;
    }
    c.ok = true;
    c.content = j["choices"][0]["message"]["content"].get<std::string>();
    c.error.clear();
    return c;
  }
  return c;
}

std::vector<Task> select_tasks(const AgentOptions& o) {
  std::vector<Task> tasks;
  for (auto& t : load_suite(o.suite)) {
    if (!t.supports(o.backend)) continue;
    if (!o.tasks.empty() && std::find(o.tasks.begin(), o.tasks.end(), t.name) == o.tasks.end()) continue;
    tasks.push_back(std::move(t));
  }
  for (const auto& want : o.tasks)
    if (std::none_of(tasks.begin(), tasks.end(), [&](const Task& t) { return t.name == want; }))
      throw LeapError("agent: no task '" + want + "' in " + o.suite + " on the " + to_string(o.backend) + " backend");
  if (tasks.empty()) throw LeapError("agent: no task of " + o.suite + " supports the " + to_string(o.backend) + " backend");
  return tasks;
}

namespace {

// The model: a batch of conversations in, one completion each out; its token count and its id.
struct Model {
  std::function<std::vector<Completion>(const std::vector<std::vector<Message>>&)> complete;
  memory::TokenCounter count = memory::approximate_tokens;
  std::string id;
};

void validate(const AgentOptions& o) {
  if (o.turns < 1) throw LeapError("agent: --turns must be at least 1");
  if (!o.context.empty() && !is_context_mode(o.context))
    throw LeapError(std::string("agent: --context must be ") + kContextModes + ", not '" + o.context + "'");
  if (o.endpoint.url.empty() == o.model_dir.empty())
    throw LeapError("agent: give either --endpoint (with --model) or --model-dir (leap's own engine)");
  if (!o.endpoint.url.empty()) check_url(o.endpoint.url);
  if (!o.model_dir.empty() && o.lm_device != "cpu" && o.lm_device != "cuda")
    throw LeapError("agent: --lm-device must be cpu or cuda");
}

// leap's own engine on a model folder: the batch decoded together, each turn its own seed.
Model engine_model(const AgentOptions& o) {
  if (o.lm_device == "cuda" && !torch::cuda::is_available()) throw LeapError("agent: --lm-device cuda: no GPU is visible");
  const bool cuda = o.lm_device == "cuda";
  auto engine = std::make_shared<lm::CausalLM>(o.model_dir, cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU),
                                               cuda ? torch::kBFloat16 : torch::kFloat32);
  auto tokenizer = std::make_shared<lm::Tokenizer>(o.model_dir + "/tokenizer.json");
  Model m;
  m.count = [tokenizer](const std::string& s) { return tokenizer->encode(s).size(); };
  m.id = o.model_dir;
  int64_t turn_seed = static_cast<int64_t>(o.seed);
  m.complete = [&o, engine, tokenizer, turn_seed](const std::vector<std::vector<Message>>& batch) mutable {
    std::vector<std::vector<int64_t>> prompts;
    for (const auto& conv : batch) {
      std::vector<lm::ChatMessage> turns;
      for (const auto& msg : conv) turns.push_back({msg.role, clean_text(msg.content, std::string::npos)});
      prompts.push_back(tokenizer->encode(lm::chat_prompt(turns)));
    }
    lm::SamplingParams sp;
    sp.temperature = o.endpoint.temperature;
    sp.max_new_tokens = o.endpoint.max_tokens;
    sp.seed = static_cast<uint64_t>(turn_seed++);  // each turn its own draw, reproducible
    sp.stop_tokens = tokenizer->stop_ids();
    sp.vocab = tokenizer->vocab_size();
    auto g = engine->generate(prompts, sp);
    std::vector<Completion> out(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      out[i].ok = true;
      out[i].attempts = 1;
      // A cut multi-byte character (max_tokens, or a model's odd tokens) is not text: U+FFFD.
      out[i].content = clean_text(tokenizer->decode(g.tokens[i]), std::string::npos);
    }
    return out;
  };
  return m;
}

// An OpenAI-compatible endpoint: `parallel` requests at a time.
Model endpoint_model(const AgentOptions& o) {
  Model m;
  m.id = o.endpoint.model;
  m.complete = [&o](const std::vector<std::vector<Message>>& batch) {
    std::vector<Completion> out(batch.size());
    const size_t step = static_cast<size_t>(std::max(1, o.parallel));
    for (size_t i = 0; i < batch.size(); i += step) {
      std::vector<std::future<Completion>> f;
      const size_t end = std::min(batch.size(), i + step);
      for (size_t k = i; k < end; ++k)
        f.push_back(std::async(std::launch::async, [&o, &batch, k] { return complete(o.endpoint, batch[k]); }));
      for (size_t k = i; k < end; ++k) out[k] = f[k - i].get();
    }
    return out;
  };
  return m;
}

// --out: new or empty, else --resume (append) or --force (replace).
void prepare_out(const AgentOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(o.out, ec) && !fs::is_empty(o.out, ec)) {
    if (!o.resume && !o.force)
      throw LeapError("leap agent: --out " + o.out + " is not empty (an earlier run's attempts would be appended to and "
                      "its memory read as context): choose another folder, --resume to continue that run, or --force "
                      "to replace it");
    if (o.force) fs::remove_all(o.out);
  }
  fs::create_directories(o.out);
}

struct Job {
  const Task* task;
  std::vector<Message> messages;
  size_t prompt_tokens = 0, context_tokens = 0;
  Completion answer;
  std::string name;  // the candidate's: TASK.turnN
  std::vector<int64_t> context_cases;  // the memory's cases its prompt showed
  int64_t base = 0;  // the case the answer refines: the incumbent it was asked to improve, else the previous attempt
};

// The agent's state across turns: the memory, each task's last case and results, the attempts log.
class Session {
 public:
  Session(const AgentOptions& o, Model model, AgentRun& run, const MemoryConfig& mc, Evaluate evaluate,
          std::vector<Task> tasks)
      : o_(o), model_(std::move(model)), run_(run), settings_(memory::context_settings(mc)), evaluate_(std::move(evaluate)),
        tasks_(std::move(tasks)), mem_(run.memory), log_(o.out + "/attempts.jsonl", std::ios::app),
        gpu_(device_model(o.backend)) {
    if (settings_.notes) notes_ = memory::target_notes(to_string(o_.backend), gpu_);
    settings_.rules.mode = run.context;
    if (o.budget_tokens) settings_.rules.budget_tokens = o.budget_tokens;
    if (!log_) throw LeapError("agent: cannot write " + o.out + "/attempts.jsonl");
    for (const auto& t : tasks_) {
      results_[t.name].task = t.name;
      prompts_[t.name] = prompt::task_prompt(t, o.backend);
    }
  }

  // One turn of every task: its prompt with the memory's context, the model's answer, the verdict.
  void turn(int turn) {
    std::vector<Job> jobs = ask(turn);
    std::map<std::string, std::string> source_of;
    auto outcome_of = judge(turn, jobs, source_of);
    for (auto& j : jobs) record(turn, j, outcome_of.at(j.name), source_of[j.name]);
  }

  void finish() {
    for (const auto& t : tasks_) run_.tasks.push_back(results_[t.name]);
  }

 private:
  std::vector<Job> ask(int turn) {
    std::vector<Job> jobs;
    for (const auto& t : tasks_) {
      Job j{&t, {}, 0, 0, {}, t.name + ".turn" + std::to_string(turn), {}, 0};
      auto ctx = memory::build_context(mem_, {t.name, to_string(o_.backend), gpu_, previous_[t.name], "", notes_},
                                       settings_.rules, model_.count, settings_.labels, settings_.ranks);
      const std::string user = prompt::with_memory(prompts_[t.name], ctx.items.empty() ? "" : ctx.text());
      j.context_tokens = ctx.tokens;
      // The prompt asks to improve the best attempt: with an incumbent in view the answer refines it
      // (a branch when the previous attempt was another case), else it fixes the previous attempt.
      j.base = ctx.incumbent ? ctx.incumbent : previous_[t.name];
      j.context_cases = ctx.cases_shown(j.base);
      j.messages.push_back({"user", user});
      j.prompt_tokens = model_.count(user);
      jobs.push_back(std::move(j));
    }
    std::vector<std::vector<Message>> batch;
    for (const auto& j : jobs) batch.push_back(j.messages);
    auto answers = model_.complete(batch);
    for (size_t k = 0; k < jobs.size(); ++k) jobs[k].answer = std::move(answers[k]);
    return jobs;
  }

  // Every answer with a kernel is compiled and judged in one batch; the rest are outcomes too.
  std::map<std::string, EvalOutcome> judge(int turn, const std::vector<Job>& jobs,
                                           std::map<std::string, std::string>& source_of) {
    std::vector<CandidateSource> cands;
    std::map<std::string, EvalOutcome> outcome_of;
    for (const auto& j : jobs) {
      if (!j.answer.ok) {
        outcome_of[j.name] = failed_outcome(j.task->name, j.name, o_.backend, Status::infra_error,
                                            "the model endpoint failed after " + std::to_string(j.answer.attempts) +
                                                " attempt(s): " + j.answer.error);
        continue;
      }
      auto code = prompt::extract_code(j.answer.content);
      if (!code) {
        outcome_of[j.name] = failed_outcome(j.task->name, j.name, o_.backend, Status::compile_error, prompt::kNoCodeBlock);
        source_of[j.name] = j.answer.content;
        continue;
      }
      source_of[j.name] = *code;
      cands.push_back({j.task->name, j.name, *code, "turn " + std::to_string(turn)});
    }
    if (!cands.empty())
      for (auto& out : evaluate_(tasks_, cands)) outcome_of[out.candidate] = out;
    return outcome_of;
  }

  // The outcome in the memory (leap's or the endpoint's failures are no attempt of the task's)
  // and in attempts.jsonl.
  void record(int turn, const Job& j, const EvalOutcome& out, const std::string& source) {
    auto& r = results_[j.task->name];
    ++r.attempts;
    r.prompt_tokens += j.prompt_tokens;
    int64_t case_id = 0;
    if (out.status == Status::infra_error) {
      ++r.infra_errors;
    } else {
      memory::Case c = memory::case_of(out, source, gpu_);
      c.turn = turn;
      c.policy = model_.id;
      c.predecessor = j.base;
      c.relation = c.predecessor ? "refined" : "";
      c.decision = j.answer.ok ? prompt::prose_of(j.answer.content) : "";
      c.retrieved = j.context_cases;
      case_id = mem_.add(c);
      previous_[j.task->name] = case_id;
      if (out.status == Status::ok) {
        if (!r.first_solved_turn) r.first_solved_turn = turn;
        r.best_speedup = std::max(r.best_speedup, out.speedup);
      }
    }
    json rec = {{"task", j.task->name},        {"turn", turn},
                {"status", to_string(out.status)}, {"check", to_string(out.check)},
                {"speedup", out.speedup},      {"feedback", out.feedback},
                {"case", case_id},             {"prompt_tokens", j.prompt_tokens},
                {"context_tokens", j.context_tokens}, {"requests", j.answer.attempts},
                {"model", model_.id},          {"context", run_.context}};
    log_ << rec.dump(-1, ' ', false, json::error_handler_t::replace) << "\n" << std::flush;
  }

  const AgentOptions& o_;
  Model model_;
  AgentRun& run_;
  memory::ContextSettings settings_;
  Evaluate evaluate_;
  const std::vector<Task> tasks_;
  memory::Memory mem_;
  std::ofstream log_;
  const std::string gpu_;
  std::vector<std::string> notes_;  // the target's notes for the cold tier
  std::map<std::string, TaskResult> results_;
  std::map<std::string, int64_t> previous_;  // the task's last recorded case
  std::map<std::string, std::string> prompts_;
};

}  // namespace

AgentRun run_agent(const AgentOptions& o, const std::string& evald_path, Evaluate evaluate) {
  validate(o);
  Model model = o.model_dir.empty() ? endpoint_model(o) : engine_model(o);
  LeapConfig cfg = o.config.empty() ? LeapConfig{} : load_config(o.config);
  std::vector<Task> tasks = select_tasks(o);
  prepare_out(o);
  AgentRun run;
  run.context = o.context.empty() ? cfg.memory.context : o.context;
  run.memory = !o.memory.empty() ? o.memory : !cfg.memory.path.empty() ? cfg.memory.path : o.out + "/memory.db";
  std::unique_ptr<EvalPipeline> pipeline;
  if (!evaluate) {
    pipeline = std::make_unique<EvalPipeline>(cfg, o.backend, evald_path, role_logger("agent"));
    evaluate = [&](const std::vector<Task>& ts, const std::vector<CandidateSource>& cs) { return pipeline->run(ts, cs); };
  }
  Session session(o, std::move(model), run, cfg.memory, std::move(evaluate), std::move(tasks));
  for (int turn = 1; turn <= o.turns; ++turn) session.turn(turn);
  session.finish();
  return run;
}

}  // namespace leap::agent
