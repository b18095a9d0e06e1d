#include <gtest/gtest.h>

#include "common/error.h"
#include <capnp/message.h>

#include "support/test_util.h"
#include "tasks/task.h"
#include "tasks/task_proto.h"

namespace leap {
namespace {

const char* kValid = R"(name = "scale"
level = 1
description = "y = 2 x"
reference = "relu"

[params]
alpha = 2.0

[[inputs]]
name = "x"
shape = ["N", 8]
distribution = { kind = "uniform", low = -1.0, high = 1.0 }

[[outputs]]
name = "y"
shape = ["N", 8]

[tolerance]
float32 = { atol = 1e-3, rtol = 1e-2 }

[sizes.cpu]
N = 4

[sizes.cuda]
N = 1024
)";

std::string error_of(const std::string& text) {
  try {
    parse_task(text, "suite/t/task.toml", "suite/t");
  } catch (const LeapError& e) {
    return e.what();
  }
  return "";
}

// The message of loading the suite at `path`, "" if it loads.
std::string suite_error_of(const std::string& path) {
  try {
    load_suite(path);
  } catch (const LeapError& e) {
    return e.what();
  }
  return "";
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

TEST(TaskParse, ValidTaskResolvesShapesPerBackend) {
  Task t = parse_task(kValid, "task.toml", "dir");
  EXPECT_EQ(t.name, "scale");
  ASSERT_EQ(t.inputs.size(), 1u);
  EXPECT_EQ(t.shape(t.inputs[0], Backend::cpu), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(t.shape(t.inputs[0], Backend::cuda), (std::vector<int64_t>{1024, 8}));
  EXPECT_EQ(t.inputs[0].distribution.kind, "uniform");
  EXPECT_DOUBLE_EQ(t.inputs[0].distribution.b, 1.0);
  ASSERT_EQ(t.params.size(), 1u);
  EXPECT_EQ(t.params[0].first, "alpha");
  EXPECT_DOUBLE_EQ(t.tolerance(DType::float32).rtol, 1e-2);
  EXPECT_DOUBLE_EQ(t.tolerance(DType::float64).atol, default_tolerance(DType::float64).atol);
}

TEST(TaskParse, MissingFieldNamesFileLineAndField) {
  auto e = error_of(replace(kValid, "reference = \"relu\"\n", ""));
  EXPECT_NE(e.find("suite/t/task.toml:1:"), std::string::npos) << e;
  EXPECT_NE(e.find("field 'reference': missing"), std::string::npos) << e;
}

TEST(TaskParse, WrongTypeNamesTheLineOfTheValue) {
  auto e = error_of(replace(kValid, "level = 1", "level = \"one\""));
  EXPECT_NE(e.find("task.toml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("'level': expected an integer"), std::string::npos) << e;
}

TEST(TaskParse, NestedFieldErrorsCarryTheirPath) {
  auto e = error_of(replace(kValid, "high = 1.0", "high = -2.0"));
  EXPECT_NE(e.find("'inputs[0].distribution.high'"), std::string::npos) << e;
  e = error_of(replace(kValid, "shape = [\"N\", 8]\ndistribution", "shape = [\"N\", 0]\ndistribution"));
  EXPECT_NE(e.find("'inputs[0].shape'"), std::string::npos) << e;
}

TEST(TaskParse, UnknownFieldsAndValuesAreRejected) {
  EXPECT_NE(error_of(replace(kValid, "level = 1", "level = 1\nlevle = 2")).find("'levle': unknown field"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kValid, "name = \"y\"", "name = \"y\"\ndtype = \"float8\"")).find("unknown dtype"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kValid, "kind = \"uniform\"", "kind = \"cauchy\"")).find("unknown distribution"),
            std::string::npos);
}

TEST(TaskParse, UnresolvableDimensionIsAnError) {
  auto e = error_of(replace(kValid, "N = 1024", "M = 1024"));
  EXPECT_NE(e.find("dimension 'N' has no size for backend cuda"), std::string::npos) << e;
}

TEST(TaskParse, SyntaxErrorNamesLineAndColumn) {
  auto e = error_of(replace(kValid, "level = 1", "level = = 1"));
  EXPECT_EQ(e.rfind("suite/t/task.toml:2:", 0), 0u) << e;
}

TEST(Suite, BuiltinSuiteCoversTheThreeLevels) {
  ::setenv("LEAP_DATA_DIR", test::source_dir().c_str(), 1);
  auto tasks = load_suite("builtin");
  EXPECT_GE(tasks.size(), 24u);
  std::map<int, int> per_level;
  for (const auto& t : tasks) {
    per_level[t.level]++;
    EXPECT_TRUE(t.supports(Backend::cpu)) << t.name;
    EXPECT_TRUE(t.supports(Backend::cuda)) << t.name;
  }
  EXPECT_GE(per_level[1], 10);
  EXPECT_GE(per_level[2], 4);
  EXPECT_GE(per_level[3], 2);
}

TEST(Suite, MissingFolderAndDuplicateNamesAreErrors) {
  test::TempDir dir;
  EXPECT_THROW(load_suite(dir.path() + "/nope"), LeapError);
  dir.write("a/task.toml", kValid);
  dir.write("b/task.toml", kValid);
  try {
    load_suite(dir.path());
    FAIL() << "duplicate accepted";
  } catch (const LeapError& e) {
    EXPECT_NE(std::string(e.what()).find("appears twice"), std::string::npos);
  }
}

TEST(Suite, ASuiteFileTakesAnotherSuitesTasksWithLimits) {
  test::TempDir dir;
  dir.write("base/a/task.toml", kValid);
  dir.write("base/b/task.toml", replace(kValid, "name = \"scale\"", "name = \"shift\""));
  dir.write("fast/suite.toml", R"(base = "../base"
tasks = ["shift"]
[limits]
min_speedup = 0.5
[limits.min_speedup_by_task]
shift = 1.5
)");
  auto tasks = load_suite(dir.path() + "/fast");
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].name, "shift");
  EXPECT_DOUBLE_EQ(tasks[0].min_speedup, 1.5);
  EXPECT_DOUBLE_EQ(load_suite(dir.path() + "/base")[0].min_speedup, 0);
  dir.write("bad/suite.toml", "base = \"../base\"\ntasks = [\"nope\"]\n");
  EXPECT_THROW(load_suite(dir.path() + "/bad"), LeapError);
  // A task's own [limits]; and the bundled refinement suite: every template task, each with one.
  EXPECT_DOUBLE_EQ(parse_task(std::string(kValid) + "\n[limits]\nmin_speedup = 0.25\n", "t.toml", ".").min_speedup, 0.25);
  EXPECT_NE(error_of(std::string(kValid) + "\n[limits]\nmax_speedup = 1\n").find("max_speedup"), std::string::npos);
  auto refine = load_suite("refine");
  EXPECT_EQ(refine.size(), 17u);
  for (const auto& t : refine) EXPECT_GT(t.min_speedup_for(Backend::cpu), 0) << t.name;
}

TEST(Suite, LimitsPerBackendOverTheSharedOnes) {
  test::TempDir dir;
  dir.write("base/a/task.toml", kValid);
  dir.write("base/b/task.toml", replace(kValid, "name = \"scale\"", "name = \"shift\""));
  dir.write("fast/suite.toml", R"(base = "../base"
[limits]
min_speedup = 0.5
[limits.cuda]
min_speedup = 2
[limits.cuda.min_speedup_by_task]
shift = 3.5
)");
  auto tasks = load_suite(dir.path() + "/fast");
  ASSERT_EQ(tasks.size(), 2u);
  for (const auto& t : tasks) {
    EXPECT_DOUBLE_EQ(t.min_speedup_for(Backend::cpu), 0.5) << t.name;
    EXPECT_DOUBLE_EQ(t.min_speedup_for(Backend::cuda), t.name == "shift" ? 3.5 : 2.0) << t.name;
  }
  // What the judge is sent is the backend's value.
  capnp::MallocMessageBuilder m;
  auto ref = m.initRoot<proto::TaskRef>();
  to_proto(tasks[1], Backend::cuda, ref);
  EXPECT_DOUBLE_EQ(ref.getMinSpeedup(), tasks[1].name == "shift" ? 3.5 : 2.0);
  dir.write("bad/suite.toml", "base = \"../base\"\n[limits.cuda]\nmin_speed = 1\n");
  auto e = suite_error_of(dir.path() + "/bad");
  EXPECT_NE(e.find("min_speed"), std::string::npos) << e;
}

TEST(Suite, SuiteFileSetsSizesOfItsTasks) {
  test::TempDir dir;
  dir.write("base/a/task.toml", kValid);
  dir.write("wide/suite.toml", "base = \"../base\"\n[sizes.cpu]\nN = 7\n");
  auto tasks = load_suite(dir.path() + "/wide");
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].sizes.at(Backend::cpu).at("N"), 7);
  EXPECT_EQ(load_suite(dir.path() + "/base")[0].sizes.at(Backend::cpu).at("N"), 4);
  // A dimension no task has is a typo, not a silent no-op.
  dir.write("typo/suite.toml", "base = \"../base\"\n[sizes.cpu]\nQ = 7\n");
  auto e = suite_error_of(dir.path() + "/typo");
  EXPECT_NE(e.find("dimension Q"), std::string::npos) << e;
  // The bundled layouts suite: both reduction kinds at one size, every task with a CPU speed limit.
  auto layouts = load_suite("layouts");
  EXPECT_EQ(layouts.size(), 11u);
  int dim0 = 0;
  for (const auto& t : layouts) {
    EXPECT_EQ(t.sizes.at(Backend::cpu).at("N"), 1022) << t.name;
    EXPECT_EQ(t.sizes.at(Backend::cpu).at("D"), 256) << t.name;
    EXPECT_GT(t.min_speedup_for(Backend::cpu), 0) << t.name;
    dim0 += t.name.find("dim0") != std::string::npos || t.name.rfind("batch_norm", 0) == 0;
  }
  EXPECT_EQ(dim0, 5);
}

}  // namespace
}  // namespace leap
