// `leap tasks list|show|check`.
#include <fmt/format.h>

#include <iostream>

#include "apps/commands.h"
#include "common/error.h"
#include "tasks/task.h"

namespace leap {
namespace {

std::string shape_text(const Task& t, const TensorDecl& d, Backend b) {
  std::string s = "(";
  auto shape = t.shape(d, b);
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

}  // namespace

int run_tasks_list(const std::string& suite) {
  auto tasks = load_suite(suite);
  std::cout << fmt::format("{:<26} {:>5}  {}\n", "task", "level", "description");
  for (const auto& t : tasks) std::cout << fmt::format("{:<26} {:>5}  {}\n", t.name, t.level, t.description);
  std::cout << tasks.size() << " tasks\n";
  return 0;
}

int run_tasks_show(const std::string& suite, const std::string& name) {
  for (const auto& t : load_suite(suite)) {
    if (t.name != name) continue;
    std::cout << "name:        " << t.name << "\nlevel:       " << t.level << "\ndescription: " << t.description
              << "\nreference:   " << t.reference << "\nfolder:      " << t.dir << "\n";
    for (auto b : {Backend::cpu, Backend::cuda}) {
      if (!t.supports(b)) continue;
      std::cout << "\n[" << to_string(b) << "]\n";
      for (const auto& d : t.inputs)
        std::cout << fmt::format("  input  {:<10} {:<8} {}\n", d.name, to_string(d.dtype), shape_text(t, d, b));
      for (const auto& d : t.outputs)
        std::cout << fmt::format("  output {:<10} {:<8} {}\n", d.name, to_string(d.dtype), shape_text(t, d, b));
    }
    for (const auto& [k, v] : t.params) std::cout << "param " << k << " = " << v << "\n";
    std::cout << "\nPyTorch reference:\n" << t.torch_code;
    return 0;
  }
  throw LeapError("no task named '" + name + "' in " + suite);
}

int run_tasks_check(const std::string& dir) {
  auto tasks = load_suite(dir);  // throws with file, line and field on the first error
  std::cout << tasks.size() << " task(s) OK\n";
  return 0;
}

}  // namespace leap
