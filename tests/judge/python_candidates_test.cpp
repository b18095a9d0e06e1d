// KernelBench-format answers (a Python module defining ModelNew) through the whole pipeline: the
// farm's syntax check, a real judge, the Python runner in its sandbox. Each hostile answer gets
// the status its first line names, and an honest one after them is ok.
#include <algorithm>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/paths.h"
#include "support/pipeline_fixture.h"

namespace leap {
namespace {

class KernelBenchFormat : public test::PipelineTest {};

// Every hostile answer gets its expected status, then the honest one is ok; the hostile outcomes.
std::vector<EvalOutcome> hostile_then_honest(EvalPipeline& pipeline, const std::vector<CandidateSource>& hostile,
                                             const CandidateSource& good) {
  auto run = hostile;
  run.push_back(good);
  auto outcomes = pipeline.run(load_suite("builtin"), run);
  if (outcomes.size() != run.size()) {
    ADD_FAILURE() << outcomes.size() << " outcomes for " << run.size() << " candidates";
    return {};
  }
  EXPECT_EQ(outcomes.back().status, Status::ok) << outcomes.back().feedback;
  outcomes.pop_back();
  test::expect_statuses(hostile, outcomes);
  return outcomes;
}

// Answers whose load_inline the farm builds go last: their build (PyTorch's headers, seconds of
// CPU) overlaps the other answers' evaluations instead of holding the first ones up.
void extensions_last(std::vector<CandidateSource>& cands) {
  std::stable_partition(cands.begin(), cands.end(),
                        [](const CandidateSource& c) { return c.source.find("load_inline(") == std::string::npos; });
}

TEST_F(KernelBenchFormat, EachAnswerGetsItsStatusAndAnHonestOneAfterThemIsOk) {
  const char* escape = "/tmp/leap-hostile-python.txt";
  std::filesystem::remove(escape);
  const std::string dir = test::source_dir() + "/tests/fixtures/kernelbench/answers";
  auto all = load_candidates(dir, Backend::cpu);
  std::vector<CandidateSource> hostile;
  for (const auto& c : all) {
    EXPECT_EQ(c.format, CandidateFormat::kernelbench) << c.name;
    if (c.name != "relu.py") hostile.push_back(c);
  }
  ASSERT_GE(hostile.size(), 16u);
  extensions_last(hostile);
  // After the attacks the honest answer, as a JSONL record stating its format: a Python answer's
  // runner is never reused (each start costs seconds of CPU here), so one honest answer after all
  // of them checks what could persist (the judge, the pool, the machine).
  test::TempDir d;
  const std::string jsonl = d.write("good.jsonl", nlohmann::json({{"task", "relu"}, {"name", "relu.py"},
                                                                   {"source", read_file(dir + "/relu.py")},
                                                                   {"format", "kernelbench"}}).dump() + "\n");
  auto good = load_candidates(jsonl, Backend::cpu).at(0);
  ASSERT_EQ(good.format, CandidateFormat::kernelbench);
  auto cfg = test::test_config(cache_.path());
  cfg.eval.call_limit_floor_ms = 200;  // a Python call's own overhead is tens of microseconds
  // These answers try the runner's defences; most compute with PyTorch's own operators, which
  // KernelBench's rule refuses first (CustomKernelRule below tries the rule).
  cfg.eval.require_custom_kernel = false;
  // A Python runner's start imports PyTorch (1-3 s of CPU here): replacements starting beside an
  // evaluation on two cores stretch it past the fixture's usual 4 s.
  cfg.sandbox.deadline_s = 12;
  cfg.sandbox.runner_spares = 1;  // each Python spare's start is seconds of CPU: one is started ahead
  cfg.compile.timeout_s = 600;  // an extension against PyTorch's headers: ~35 s alone here, more beside other tests
  auto pipeline = make(cfg);
  auto outcomes = hostile_then_honest(*pipeline, hostile, good);
  // The load_inline answers' kernels were built by the farm (g++ against PyTorch), not in the
  // runner: with the light prelude, and with the whole <torch/extension.h> where that failed.
  std::map<std::string, std::string> compiler;
  for (const auto& o : outcomes) compiler[o.candidate] = o.compiler;
  EXPECT_EQ(compiler["relu.load_inline.py"], "python+c++");
  EXPECT_EQ(compiler["relu.load_inline_whole_api.py"], "python+c++ +torch-all");
  EXPECT_EQ(pipeline->evaluator_restarts(), 0);
  EXPECT_FALSE(std::filesystem::exists(escape)) << escape << " was written by a candidate";
}

// KernelBench's rule (on by default): a correctness call must run a kernel of the answer's own, and
// no PyTorch operator a vendor library computes, also when an extension hands the work to ATen.
TEST_F(KernelBenchFormat, CustomKernelRule) {
  const std::string dir = test::source_dir() + "/tests/fixtures/kernelbench";
  auto hostile = load_candidates(dir + "/rule", Backend::cpu);
  ASSERT_EQ(hostile.size(), 3u);
  // Triton answers too (Triton's interpreter on the CPU): a wrong kernel, then the honest one.
  hostile.push_back(load_candidates(dir + "/triton/relu.wrong_answer.py", Backend::cpu).at(0));
  extensions_last(hostile);
  auto good = load_candidates(dir + "/triton/relu.py", Backend::cpu).at(0);
  auto cfg = test::test_config(cache_.path());
  ASSERT_TRUE(cfg.eval.require_custom_kernel);
  cfg.eval.call_limit_floor_ms = 1000;  // Triton's interpreter: tens of milliseconds a call
  cfg.sandbox.deadline_s = 30;
  cfg.sandbox.runner_spares = 1;
  cfg.compile.timeout_s = 600;
  auto pipeline = make(cfg);
  auto outcomes = hostile_then_honest(*pipeline, hostile, good);
  for (const auto& o : outcomes) {
    if (o.check == Check::vendor_library) {
      EXPECT_NE(o.feedback.find("aten::mm"), std::string::npos) << o.feedback;
    }
  }
}

// A bare runner (no namespaces) sees the judge in /proc under the same user: the runner drops every
// capability before candidate code (what stops it here, where leap runs as root: checked to fail
// without) and the judge is not dumpable (what stops it where leap runs as a user), so the judge's
// memory (its pristine inputs and references) does not open, from a runner of its own or one
// forked from a zygote.
TEST_F(KernelBenchFormat, ABareRunnerCannotOpenTheJudgesMemory) {
  CandidateSource c;
  c.task = "relu";
  c.name = "relu.read_judge.py";
  c.format = CandidateFormat::kernelbench;
  c.source = R"(import os
import torch.nn as nn


def judges():
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "leap-evald":
                    found.append(pid)
        except OSError:
            pass
    return found


class ModelNew(nn.Module):
    def forward(self, x):
        refused = 0
        for pid in judges():
            try:
                with open(f"/proc/{pid}/mem", "rb"):
                    return x * 2  # it opened: wrong, so that the test sees it
            except PermissionError:
                refused += 1
            except (ProcessLookupError, FileNotFoundError):
                pass  # another test's judge that ended since the listing: nothing opened
        if not refused:
            raise LookupError("no judge refused: the test would prove nothing")
        return x.relu()
)";
  for (bool zygote : {false, true}) {
    SCOPED_TRACE(zygote ? "forked from a zygote" : "a runner of its own");
    auto cfg = test::test_config(cache_.path());
    cfg.sandbox.namespaces = false;
    cfg.sandbox.python_zygote = zygote;
    cfg.sandbox.runner_spares = 1;
    cfg.sandbox.deadline_s = 12;
    cfg.eval.require_custom_kernel = false;
    cfg.eval.call_limit_floor_ms = 1000;  // each call lists /proc
    auto outcomes = make(cfg)->run(load_suite("builtin"), {c});
    ASSERT_EQ(outcomes.size(), 1u);
    EXPECT_EQ(outcomes[0].status, Status::ok) << outcomes[0].feedback;
  }
}

// A JSONL record states its format or is told by its source (`class ModelNew` without leap_kernel);
// an unknown format is refused naming the line.
TEST(KernelBenchFormatRecords, StateOrRevealTheirFormat) {
  const std::string source = read_file(test::source_dir() + "/tests/fixtures/kernelbench/answers/relu.py");
  test::TempDir d;
  nlohmann::json stated = {{"task", "relu"}, {"name", "stated"}, {"source", source}, {"format", "kernelbench"}};
  nlohmann::json detected = {{"task", "relu"}, {"name", "detected"}, {"source", source}};
  nlohmann::json leap = {{"task", "relu"}, {"name", "leap"},
                         {"source", read_file(test::source_dir() + "/examples/cpu/relu.cpp")}};
  const std::string path = d.write("answers.jsonl", stated.dump() + "\n" + detected.dump() + "\n" + leap.dump() + "\n");
  auto cands = load_candidates(path, Backend::cpu);
  ASSERT_EQ(cands.size(), 3u);
  EXPECT_EQ(cands[0].format, CandidateFormat::kernelbench);
  EXPECT_EQ(cands[1].format, CandidateFormat::kernelbench);
  EXPECT_EQ(cands[2].format, CandidateFormat::leap_abi);

  const std::string bad = d.write("bad.jsonl", R"({"task": "relu", "source": "x", "format": "triton"})" "\n");
  try {
    load_candidates(bad, Backend::cpu);
    ADD_FAILURE() << "an unknown format was accepted";
  } catch (const LeapError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:1: field 'format'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(detect_format("#include <leap/candidate.h>\nLEAP_ENTRY int leap_kernel("), CandidateFormat::leap_abi);
}

}  // namespace
}  // namespace leap
