// A task of the built-in suite by name, for tests that need one (the suite loaded once).
#pragma once
#include <cstdlib>
#include <string>
#include <vector>

#include "support/test_util.h"
#include "tasks/task.h"

namespace leap::test {

// nullptr if the suite has no task of that name.
inline const Task* builtin_task(const std::string& name) {
  static const std::vector<Task> tasks = [] {
    ::setenv("LEAP_DATA_DIR", source_dir().c_str(), 1);
    return load_suite("builtin");
  }();
  for (const auto& t : tasks)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace leap::test
