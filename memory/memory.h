// Experience graph memory (KOPE): every attempt is a case in a persistent graph, linked to the
// case it refined; cases are labelled by their step over that predecessor and ranked by the value
// of their subtree; the next turn's context is chosen from the graph under a token budget.
// Storage: SQLite in WAL mode, one writer (the learner in `leap run`, the front door in
// `leap serve`); every write is one transaction, so a killed writer loses at most the one in flight.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/outcome.h"

struct sqlite3;

namespace leap::memory {

struct Case {
  int64_t id = 0;            // assigned by Memory::add
  std::string task, backend, gpu;  // gpu: the device's model (the CPU's on the CPU backend)
  std::string source;        // stored once per content (sources table, keyed by source_hash)
  std::string source_hash;   // content_hash of the source (BLAKE2b, hex), set by Memory::add
  Status status = Status::infra_error;
  Check check = Check::none;
  std::string feedback;
  double speedup = 0;        // over the reference; 0 unless status is ok
  double candidate_us = 0;   // the candidate's median call
  int turn = 1;
  std::string policy;        // policy or model id
  double time = 0;           // unix seconds
  int64_t predecessor = 0;   // the case this one refined (0: none)
  std::string relation;      // "refined" (the previous turn) or "retrieved" (from the context)
  std::string decision;      // what the attempt set out to do: the idea text of the model's answer
  // The profiler's label of a correct case's longest kernel ([eval] profile): memory-bound,
  // compute-bound or latency-bound; "" when it was not profiled.
  std::string bottleneck;
  std::vector<int64_t> retrieved;  // the cases that were in its context (KOPE's retrieved edges)
};

// A case from an evaluation's outcome and the candidate's source (turn 1, no predecessor, time now).
Case case_of(const EvalOutcome& o, const std::string& source, const std::string& gpu = "");

// Step labels by r = speedup(case) / speedup(predecessor); thresholds as reported in summaries
// of the KOPE paper, configurable ([memory]).
struct LabelRules {
  double improvement = 1.05;         // r >= this: improvement
  double slight_regression = 0.85;   // [this, 1): slight regression; below: regression
};

// A case's label: improvement | marginal | slight_regression | regression (an ok case after an
// ok predecessor), first_pass (ok, no ok predecessor), or the status of a failure, with the
// check of a cheat ("cheat_detected:stream_escape").
std::string label_of(const Case& c, const Case* predecessor, const LabelRules& rules = {});
// "status" or "status (check)", as the context and `leap memory show` print a case's verdict.
std::string status_text(const Case& c);

// Subtree value: d(v) = a * r(v) + b * gamma * sum over successors d(s), where r(v) is the step
// ratio (a case without an ok predecessor: its speedup over the reference; a failure: 0), with
// a = b = 0.5, gamma = 0.7. The rank multiplies d(v) by a confidence n / (n + 2), n = how often
// this source was evaluated for this task (repeated evidence).
struct RankRules {
  double a = 0.5, b = 0.5, gamma = 0.7;
  double confidence_k = 2;
};

struct RankedCase {
  Case c;
  std::string label;
  double ratio = 0, value = 0, confidence = 0, rank = 0;
  int evaluations = 1;
};

struct Stats {
  int64_t cases = 0, sources = 0, tasks = 0, roots = 0;
  std::map<std::string, int64_t> by_status, by_label;
};

class Memory {
 public:
  // Opens the database at `path` (created unless `create` is false); an existing one must pass
  // SQLite's integrity check.
  explicit Memory(const std::string& path, bool create = true);
  ~Memory();
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  // Records a case (one transaction); returns its id. A predecessor must exist.
  int64_t add(Case c);
  std::optional<Case> get(int64_t id) const;
  // Every case of `task` ("" = all), oldest first.
  std::vector<Case> cases(const std::string& task = "") const;
  // The tasks that have cases, by name.
  std::vector<std::string> tasks() const;
  // Cases of `task` ranked (best first), with labels, subtree values and confidence.
  std::vector<RankedCase> ranked(const std::string& task, const LabelRules& labels = {}, const RankRules& rules = {}) const;
  Stats stats(const LabelRules& labels = {}) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// ---- the context of the next attempt

using TokenCounter = std::function<size_t(const std::string&)>;
// About 4 bytes per token: the default when the policy's tokenizer is not at hand.
size_t approximate_tokens(const std::string& text);

struct ContextQuery {
  std::string task, backend, gpu;
  int64_t previous = 0;   // the previous attempt's case (0: the first turn)
  std::string family;     // related tasks: names sharing this prefix ("" = the task's name up to its first '_':
                          // kb1 for KernelBench level 1 imports)
  std::vector<std::string> notes = {};  // the target's documentation notes (target_notes), for the cold tier
};

struct ContextRules {
  std::string mode = "active";  // active (tiers) | passive (full history, newest first) | none
  size_t budget_tokens = 2048;
  int hot_cases = 2;            // best cases of this task in full source (beside the previous attempt)
  int warm_cases = 8;           // summaries of the next-ranked cases and of related tasks
  int cold_lessons = 8;         // one-line lessons from failures and their fixes
  // Each tier's own token cap within budget_tokens (0: only the total).
  size_t hot_tokens = 0, warm_tokens = 0, cold_tokens = 0;
  size_t max_source_chars = 6000;  // a source longer than this is cut (and says so)
};

struct ContextItem {
  std::string tier;   // hot | warm | cold | passive
  int64_t case_id = 0;
  std::string text;
  size_t tokens = 0;
};

struct Context {
  std::vector<ContextItem> items;
  size_t tokens = 0;
  int64_t incumbent = 0;  // the incumbent's case when the context shows it (what the prompt asks to improve)
  // The cases its items show, but `except` (the case the next attempt refines), each once, in order:
  // the next attempt's retrieved edges.
  std::vector<int64_t> cases_shown(int64_t except) const;
  std::string text() const;  // the items in order, tiers under their headings
};

// Short documentation notes of the target, one line each: leap's prompt/notes/<backend>.md, and
// <backend>-<gpu>.md for a GPU whose name holds that model (h200: "NVIDIA H200"). Empty when none.
std::vector<std::string> target_notes(const std::string& backend, const std::string& gpu);

// The rules of a [memory] section.
struct ContextSettings {
  ContextRules rules;
  LabelRules labels;
  RankRules ranks;
  bool notes = true;  // the caller passes target_notes in ContextQuery::notes
};
ContextSettings context_settings(const MemoryConfig& mc);

// Fills hot, then warm, then cold items while they fit the budget and their tier's cap (an item
// that does not fit is skipped; a later, smaller one may still fit); passive: the task's history,
// newest first, until the budget is spent. Never exceeds rules.budget_tokens nor a tier's cap.
Context build_context(const Memory& m, const ContextQuery& q, const ContextRules& rules = {},
                      const TokenCounter& count = approximate_tokens, const LabelRules& labels = {},
                      const RankRules& ranks = {});

}  // namespace leap::memory
