// A real evaluation pipeline (real g++, real leap-evald processes) with test-sized budgets.
#pragma once
#include <gtest/gtest.h>

#include <memory>

#include "common/log.h"
#include "test_util.h"
#include "worker/eval_pipeline.h"

namespace leap::test {

inline LeapConfig test_config(const std::string& cache_dir) {
  LeapConfig cfg;
  cfg.compile.cache_dir = cache_dir;
  cfg.compile.jobs = 2;
  cfg.sandbox.deadline_s = 4;
  cfg.eval.timing_budget_ms = 30;
  cfg.eval.min_samples = 5;
  return cfg;
}

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("LEAP_DATA_DIR", source_dir().c_str(), 1); }
  std::unique_ptr<EvalPipeline> make(const LeapConfig& cfg) {
    return std::make_unique<EvalPipeline>(cfg, Backend::cpu, build_dir() + "/leap-evald", role_logger("test"));
  }
  TempDir cache_;
};

}  // namespace leap::test
