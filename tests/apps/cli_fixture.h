// The `leap` binary as users run it: a fixture that runs it with a private cache and data dir.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "common/subprocess.h"
#include "support/test_util.h"

namespace leap {

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
    ::setenv("LEAP_CACHE_DIR", dir_.path().c_str(), 1);
  }
  CommandResult leap(std::vector<std::string> args) {
    args.insert(args.begin(), test::build_dir() + "/leap");
    return run_command(args, 300);
  }
  std::string config() {
    return dir_.write("test.toml", "[sandbox]\ndeadline_s = 4\n[eval]\ntiming_budget_ms = 30\nmin_samples = 5\n");
  }
  test::TempDir dir_;
};

inline std::string json_line(const std::string& task, const std::string& name, const std::string& path) {
  nlohmann::json j = {{"task", task}, {"name", name}, {"source", read_file(path)}};
  return j.dump() + "\n";
}

}  // namespace leap
