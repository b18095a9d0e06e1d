// `leap memory show|stats|export`: the experience graph as people read it.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>

#include "apps/commands.h"
#include "common/error.h"
#include "memory/memory.h"

namespace leap {

int run_memory(const MemoryArgs& a) {
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
      tasks.assign(all.begin(), all.end());
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
                   r.c.status + (r.c.check.empty() ? "" : " (" + r.c.check + ")"), r.c.speedup, r.label, r.value,
                   r.confidence);
    }
    return 0;
  }
  if (a.what == "export") {  // one JSON object per case, oldest first
    for (const auto& c : m.cases(a.task)) {
      nlohmann::json j = {{"id", c.id},           {"task", c.task},         {"backend", c.backend},
                          {"gpu", c.gpu},         {"source", c.source},     {"source_hash", c.source_hash},
                          {"status", c.status},   {"check", c.check},       {"feedback", c.feedback},
                          {"speedup", c.speedup}, {"candidate_us", c.candidate_us}, {"turn", c.turn},
                          {"policy", c.policy},   {"time", c.time},         {"predecessor", c.predecessor},
                          {"relation", c.relation}};
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    return 0;
  }
  throw LeapError("leap memory: '" + a.what + "' is not show, stats or export");
}

}  // namespace leap
