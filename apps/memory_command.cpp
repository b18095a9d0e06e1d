// `leap memory show|stats|export`: the experience graph as people read it.
#include <CLI/CLI.hpp>

#include <memory>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>

#include "apps/commands.h"
#include "common/error.h"
#include "memory/memory.h"

namespace leap {

struct MemoryArgs {
  std::string what;  // show | stats | export
  std::string path;  // the memory database
  std::string task;  // show: required; export: "" = every task
};

static int run_memory(const MemoryArgs& a) {
  if (a.path.empty()) throw LeapError("leap memory: --path (the memory database) is required");
  memory::Memory m(a.path, /*create=*/false);
  if (a.what == "stats") {
    auto st = m.stats();
    fmt::print("{} cases of {} tasks ({} distinct sources, {} roots)\n\n| status | cases |\n|---|---:|\n", st.cases,
               st.tasks, st.sources, st.roots);
    for (const auto& [s, n] : st.by_status) fmt::print("| {} | {} |\n", s, n);
    fmt::print("\n| label | cases |\n|---|---:|\n");
    for (const auto& [l, n] : st.by_label) fmt::print("| {} | {} |\n", l, n);
    return 0;
  }
  if (a.what == "show") {  // one task's ranked cases; without --task, every task's in turn
    std::vector<std::string> tasks = {a.task};
    if (a.task.empty()) {
      std::set<std::string> all;
      for (const auto& c : m.cases("")) all.insert(c.task);
      if (all.empty()) throw LeapError("leap memory show: " + a.path + " holds no case yet");
      tasks.clear();
      for (const auto& t : all) tasks.push_back(t);
    }
    for (const auto& task : tasks) {
      auto ranked = m.ranked(task);
      if (ranked.empty()) throw LeapError("leap memory show: no case of task '" + task + "' in " + a.path);
      if (a.task.empty()) fmt::print("{}## {}\n\n", &task == &tasks.front() ? "" : "\n", task);
      fmt::print("| rank | case | from | turn | status | speedup | label | value | confidence |\n");
      fmt::print("|---:|---:|---:|---:|---|---:|---|---:|---:|\n");
      for (const auto& r : ranked)
        fmt::print("| {:.3f} | {} | {} | {} | {} | {:.3f} | {} | {:.3f} | {:.2f} |\n", r.rank, r.c.id,
                   r.c.predecessor ? std::to_string(r.c.predecessor) : "-", r.c.turn,
                   status_text(r.c), r.c.speedup, r.label, r.value,
                   r.confidence);
    }
    return 0;
  }
  if (a.what == "export") {  // one JSON object per case, oldest first
    for (const auto& c : m.cases(a.task)) {
      nlohmann::json j = {{"id", c.id},           {"task", c.task},         {"backend", c.backend},
                          {"gpu", c.gpu},         {"source", c.source},     {"source_hash", c.source_hash},
                          {"status", to_string(c.status)},   {"check", to_string(c.check)},       {"feedback", c.feedback},
                          {"speedup", c.speedup}, {"candidate_us", c.candidate_us}, {"turn", c.turn},
                          {"policy", c.policy},   {"time", c.time},         {"predecessor", c.predecessor},
                          {"relation", c.relation}, {"decision", c.decision}, {"bottleneck", c.bottleneck},
                          {"retrieved", c.retrieved}};
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    return 0;
  }
  throw LeapError("leap memory: '" + a.what + "' is not show, stats or export");
}

void add_memory_command(CLI::App& app, Commands& c) {
  auto ma = std::make_shared<MemoryArgs>();
  auto* mem = app.add_subcommand("memory", "the experience graph memory: inspect it (docs/memory.md)");
  mem->require_subcommand(1);
  auto* mem_show = mem->add_subcommand("show", "a task's cases, ranked, with labels");
  auto* mem_stats = mem->add_subcommand("stats", "counts by status and label");
  auto* mem_export = mem->add_subcommand("export", "every case as a JSON line (sources included)");
  for (auto* sub : {mem_show, mem_stats, mem_export})
    sub->add_option("--path", ma->path, "the memory database (SQLite)")->required();
  mem_show->add_option("--task", ma->task, "the task (default: every task in turn)");
  mem_export->add_option("--task", ma->task, "only this task");
  for (auto* sub : {mem_show, mem_stats, mem_export})
    c.add(sub, [ma, sub] {
      ma->what = sub->get_name();
      return run_memory(*ma);
    });
}

}  // namespace leap
