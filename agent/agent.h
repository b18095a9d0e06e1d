// Agent mode (KOPE's setting: no training, an existing model): every task refined over several
// turns by a chat model behind an OpenAI-compatible endpoint, each turn's prompt built from the
// experience graph, every attempt compiled and judged by leap as usual and recorded in the graph.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/backend.h"
#include "common/outcome.h"
#include "prompt/prompt.h"
#include "tasks/candidates.h"
#include "tasks/task.h"

namespace leap::agent {

struct Message {
  std::string role, content;
};

struct EndpointOptions {
  std::string url;           // base URL (http://host:port[/prefix]); /v1/chat/completions is appended
  std::string model;
  std::string api_key;       // "" = LEAP_AGENT_API_KEY, else OPENAI_API_KEY, else none
  double temperature = 0.7;
  int max_tokens = 2048;
  double timeout_s = 120;    // per request
  int retries = 3;           // further attempts after a failed request
  double backoff_s = 0.5;    // doubled per retry; a 429's Retry-After wins (at most 30 s)
};

struct Completion {
  bool ok = false;
  std::string content;  // the answer's text
  std::string error;    // why not, after every retry
  int attempts = 0;
};

// One chat completion with retries (connection errors, timeouts, 429 and 5xx, malformed answers).
Completion complete(const EndpointOptions& e, const std::vector<Message>& messages);

struct AgentOptions {
  std::string suite = "builtin";
  std::vector<std::string> tasks;  // empty: every task of the suite on the backend
  Backend backend = Backend::cpu;
  std::string config;              // leap's TOML config ([compile], [sandbox], [eval])
  EndpointOptions endpoint;
  // Or leap's own engine (docs/lm.md): a Hugging Face folder (config.json, safetensors,
  // tokenizer.json), all of a turn's prompts in one batch; the context budget in its tokens.
  std::string model_dir;
  std::string lm_device = "cpu";  // cpu | cuda
  uint64_t seed = 0;              // sampling seed of the built-in engine
  int turns = 3;
  // The experience graph and its context; empty / 0: from [memory] in the config (docs/memory.md).
  std::string memory;              // "" = [memory] path, else OUT/memory.db
  std::string context;             // active | passive | none
  size_t budget_tokens = 0;        // the context's budget (about 4 bytes a token)
  std::string out = "agent-run";   // attempts.jsonl, memory.db
  bool resume = false;             // a non-empty `out`: append to its attempts, keep its memory
  bool force = false;              // a non-empty `out`: replace it
  int parallel = 8;                // requests to the endpoint at once
};

struct TaskResult {
  std::string task;
  int first_solved_turn = 0;  // 0: never
  double best_speedup = 0;
  int attempts = 0, infra_errors = 0;
  size_t prompt_tokens = 0;   // sent, about 4 bytes a token
};

struct AgentRun {
  std::vector<TaskResult> tasks;
  std::string context, memory;  // as resolved from the options and the config
};

// Compiles and judges a turn's candidates; an outcome per candidate (its `candidate` the name).
using Evaluate = std::function<std::vector<EvalOutcome>(const std::vector<Task>&, const std::vector<CandidateSource>&)>;

// The suite's tasks the agent works on: those of `o.suite` on `o.backend`, narrowed to `o.tasks`
// (an unknown name is an error).
std::vector<Task> select_tasks(const AgentOptions& o);

// `evaluate`: where the candidates are judged (leap agent under mpirun: the worker ranks); empty:
// this process's compile farm and judges.
AgentRun run_agent(const AgentOptions& o, const std::string& evald_path, Evaluate evaluate = {});

}  // namespace leap::agent
