// The memory tests' fixture: a fresh SQLite file per test and hand-made cases.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "memory/memory.h"

namespace leap::memory {

class MemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("leap-memory-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "memory.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static Case make(const std::string& task, const std::string& source, const std::string& status, double speedup,
                   int64_t pred = 0, int turn = 1) {
    Case c;
    c.task = task;
    c.backend = "cuda";
    c.gpu = "NVIDIA H200";
    c.source = source;
    c.status = *status_from(status);
    c.speedup = speedup;
    c.predecessor = pred;
    c.relation = pred ? "refined" : "";
    c.turn = turn;
    if (status != "ok") c.feedback = status + " in " + source + "\nsecond line";
    return c;
  }
  // The cases a context's `tier` items show, in order.
  static std::vector<int64_t> case_ids(const Context& ctx, const std::string& tier) {
    std::vector<int64_t> ids;
    for (const auto& it : ctx.items)
      if (it.tier == tier) ids.push_back(it.case_id);
    return ids;
  }
  std::filesystem::path dir_;
  std::string path_;
};

}  // namespace leap::memory
