// leap lm, leap sft and leap tasks (render, check, import kernelbench) as users run them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <nlohmann/json.hpp>

#include "apps/cli_fixture.h"
#include "support/loop_checks.h"

namespace leap {
namespace {

TEST_F(Cli, LmGeneratesAndScoresFromAModelFolder) {
  const std::string model = test::source_dir() + "/tests/fixtures/lm/tiny-qwen2";
  auto a = leap({"lm", "generate", "--model", model, "--prompt", "int main() {", "--max-tokens", "12"});
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("1 x up to 12 tokens (12) in"), std::string::npos) << a.output;
  auto b = leap({"lm", "generate", "--model", model, "--prompt", "int main() {", "--max-tokens", "12"});
  EXPECT_EQ(a.output.substr(0, a.output.find("leap lm:")), b.output.substr(0, b.output.find("leap lm:")));  // greedy
  auto s = leap({"lm", "generate", "--model", model, "--prompt", "hi", "--chat", "--temperature", "1", "--seed", "3"});
  EXPECT_EQ(s.exit_code, 0) << s.output;
  // A batch decodes together; its first row is the prompt alone with the same seed.
  auto batch = leap({"lm", "generate", "--model", model, "--prompt", "hi", "--chat", "--temperature", "1", "--seed", "3",
                     "--batch", "5"});
  ASSERT_EQ(batch.exit_code, 0) << batch.output;
  EXPECT_NE(batch.output.find("leap lm: 5 x up to"), std::string::npos) << batch.output;
  EXPECT_EQ(batch.output.substr(0, batch.output.find("leap lm:")), s.output.substr(0, s.output.find("leap lm:")));
  auto zero = leap({"lm", "generate", "--model", model, "--prompt", "hi", "--batch", "0"});
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_NE(zero.output.find("--batch"), std::string::npos) << zero.output;
  auto sc = leap({"lm", "score", "--model", model, "--text", "int main() { return 0; }"});
  ASSERT_EQ(sc.exit_code, 0) << sc.output;
  EXPECT_NE(sc.output.find("log-probability -"), std::string::npos) << sc.output;
  auto bad = leap({"lm", "generate", "--model", dir_.path(), "--prompt", "x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("config.json: cannot read"), std::string::npos) << bad.output;
}

TEST_F(Cli, SftTrainsOnKernelSourcesAndRefusesBadData) {
  const std::string model = test::source_dir() + "/tests/fixtures/lm/tiny-qwen2";
  dir_.write("data/relu.example.cpp", read_file(test::source_dir() + "/examples/cpu/relu.cpp"));
  dir_.write("data/silu.example.cpp", read_file(test::source_dir() + "/examples/cpu/silu.cpp"));
  auto r = leap({"sft", "--model", model, "--data", dir_.path() + "/data", "--out", dir_.path() + "/tuned", "--steps", "6",
                 "--batch", "2", "--lr", "3e-3"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("leap sft: 2 examples, 6 steps"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("do not compile"), std::string::npos) << r.output;
  auto log = test::read_jsonl(dir_.path() + "/tuned/sft.jsonl");
  ASSERT_EQ(log.size(), 6u);
  EXPECT_LT(log.back()["loss"].get<double>(), log.front()["loss"].get<double>());
  auto g = leap({"lm", "generate", "--model", dir_.path() + "/tuned", "--prompt", "int", "--max-tokens", "3"});
  EXPECT_EQ(g.exit_code, 0) << g.output;  // the saved folder is a model folder
  auto j = dir_.write("pairs.jsonl", "{\"prompt\": \"Write relu.\", \"completion\": \"y = max(x, 0)\"}\n\n[1, 2]\n");
  // The fine-tuned model is not replaced unless asked: a second run into it is refused.
  auto again = leap({"sft", "--model", model, "--data", dir_.path() + "/data", "--out", dir_.path() + "/tuned", "--steps", "1"});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("is not empty"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("--force"), std::string::npos) << again.output;
  auto bad = leap({"sft", "--model", model, "--data", j, "--out", dir_.path() + "/x", "--steps", "1"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("pairs.jsonl:3: not a JSON object"), std::string::npos) << bad.output;
  dir_.write("data2/no_such_task.v1.cpp", "int x;");
  bad = leap({"sft", "--model", model, "--data", dir_.path() + "/data2", "--out", dir_.path() + "/x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("no task 'no_such_task'"), std::string::npos) << bad.output;

  // --refine: the sources judged by leap eval; each failed one becomes a second turn (its verdict,
  // then a passing source of its task); a task with no passing source gives none.
  dir_.write("data/relu.broken.cpp", "int leap_kernel(");
  dir_.write("data/silu.broken.cpp", "int leap_kernel(");
  r = leap({"eval", "--config", config(), "--candidates", dir_.path() + "/data", "--out", dir_.path() + "/verdicts.jsonl",
            "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string verdicts = read_file(dir_.path() + "/verdicts.jsonl");
  verdicts = std::regex_replace(verdicts, std::regex(R"re("candidate":"silu\.example\.cpp"(.*)"status":"ok")re"),
                                R"re("candidate":"silu.example.cpp"$1"status":"wrong_answer")re");  // silu: none passes
  dir_.write("verdicts.jsonl", verdicts);
  r = leap({"sft", "--model", model, "--data", dir_.path() + "/data", "--refine", dir_.path() + "/verdicts.jsonl", "--out",
            dir_.path() + "/tuned2", "--steps", "2", "--batch", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("leap sft: 1 of the examples are second turns"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("leap sft: 5 examples"), std::string::npos) << r.output;
  // Sources that do not compile are trained on, and named.
  EXPECT_NE(r.output.find("leap sft: warning: 2 of 4 training examples do not compile"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("/data/relu.broken.cpp: "), std::string::npos) << r.output;
  dir_.write("stray.jsonl", "{\"candidate\": \"relu.other.cpp\", \"task\": \"relu\", \"status\": \"ok\"}\n");
  bad = leap({"sft", "--model", model, "--data", dir_.path() + "/data", "--refine", dir_.path() + "/stray.jsonl", "--out",
              dir_.path() + "/x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("stray.jsonl:1: candidate relu.other.cpp is not a source in"), std::string::npos) << bad.output;
}

TEST_F(Cli, TasksCommands) {
  auto r = leap({"tasks", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("32 tasks"), std::string::npos) << r.output;
  r = leap({"tasks", "show", "attention_head"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("torch.softmax"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(4096, 128)"), std::string::npos) << r.output;  // CUDA size
  r = leap({"tasks", "check"});
  EXPECT_EQ(r.exit_code, 0) << r.output;

  std::string broken = read_file(test::source_dir() + "/tasks/suite/relu/task.toml");
  broken.replace(broken.find("dtype = \"float32\""), 17, "dtype = 32");
  dir_.write("suite/relu/task.toml", broken);
  r = leap({"tasks", "check", dir_.path() + "/suite"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("relu/task.toml:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'inputs[0].dtype': expected a string"), std::string::npos) << r.output;
}

// The compact form (knob lines + the task's template header) is the same kernel as the full
// rendering: the same verdicts, and the committed headers are what leap generates.

TEST_F(Cli, CompactSchedulesIncludeCommittedHeadersAndJudgeLikeTheFullRendering) {
  auto r = leap({"tasks", "render", "all", "--headers-to", dir_.path() + "/h"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  size_t headers = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path() + "/h/leap/schedule")) {
    const auto committed = test::source_dir() + "/include/leap/schedule/" + e.path().filename().string();
    ASSERT_TRUE(std::filesystem::exists(committed)) << committed << " missing: leap tasks render all --headers-to include";
    EXPECT_EQ(read_file(e.path().string()), read_file(committed)) << committed << " is stale: leap tasks render all --headers-to include";
    ++headers;
  }
  EXPECT_EQ(headers, 23u);
  // A passing choice, a zero-filled tail where the size leaves a remainder (wrong_answer), and a
  // vector x unroll over the template's limit (compile_error), in both forms.
  std::string jsonl;
  const std::map<std::string, std::string> choices = {{"pass", "order=row,vector=4,unroll=2,tail=scalar"},
                                                      {"zero", "order=row,vector=8,unroll=1,tail=zero"},
                                                      {"over", "order=row,vector=8,unroll=4,tail=scalar"}};
  for (const auto& [label, choice] : choices)
    for (bool compact : {false, true}) {
      std::vector<std::string> args = {"tasks", "render", "softmax", "--choice", choice};
      if (compact) args.push_back("--compact");
      auto c = leap(args);
      ASSERT_EQ(c.exit_code, 0) << c.output;
      if (compact) {
        EXPECT_LT(c.output.size(), 200u) << c.output;
      }
      nlohmann::json j = {{"task", "softmax"}, {"name", label + (compact ? ".compact" : ".full")}, {"source", c.output}};
      jsonl += j.dump() + "\n";
    }
  auto in = dir_.write("compact.jsonl", jsonl);
  r = leap({"eval", "--config", config(), "--candidates", in, "--out", dir_.path() + "/c.jsonl", "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, std::string> status;
  for (const auto& o : test::read_jsonl(dir_.path() + "/c.jsonl")) status[o["candidate"]] = o["status"];
  EXPECT_EQ(status["pass.full"], "ok");
  for (const auto& [label, _] : choices) EXPECT_EQ(status[label + ".compact"], status[label + ".full"]) << label;
  EXPECT_EQ(status["over.compact"], "compile_error");
  r = leap({"tasks", "render", "softmax", "--compact", "--backend", "cuda"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("CPU-only"), std::string::npos) << r.output;
}

TEST_F(Cli, KernelBenchProblemsImportAsTasksJudgedLikeBuiltins) {
  // leap's own problems in KernelBench's format: elementwise (scaled down for the CPU), a
  // reduction with init arguments, two inputs, parameters and a buffer, a convolution with two
  // outputs, a layer stack, a matmul whose output dwarfs its inputs; ReLU of KernelBench's [0, 1)
  // draw (the identity there: imported with a symmetric draw) and HardTanh's (the identity on
  // [-1, 1) too: a wider one); and three that cannot be tasks.
  const std::string src = test::source_dir() + "/tests/fixtures/kernelbench", out = dir_.path() + "/kb";
  auto r = leap({"tasks", "import", "kernelbench", src, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("11 task(s) in " + out + " load as leap tasks"), std::string::npos) << r.output;
  // Where CUDA is present the import is for "cpu,cuda" and a refusal names the backend that refused.
  auto refusal = [&](const std::string& file) {
    auto at = r.output.find("failed  L1 " + file + ": ");
    return at == std::string::npos ? std::string() : r.output.substr(at, r.output.find('\n', at) - at);
  };
  EXPECT_NE(refusal("4_random_in_forward.py").find("forward is not deterministic"), std::string::npos) << r.output;
  EXPECT_NE(refusal("5_untraceable.py").find("the trace disagrees"), std::string::npos) << r.output;
  EXPECT_NE(refusal("8_identity.py").find("returns one of its inputs unchanged"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kb1_7_relu_of_rand (traced); inputs drawn from [-1, 1)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kb1_10_hardtanh_of_rand (traced); inputs drawn from [-2, 2)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[1/14] L1 1_relu.py"), std::string::npos) << r.output;  // progress, problem by problem
  // Scaled until everything it makes fits (the output, 32768 x 32768 at KernelBench's sizes, too),
  // not the inputs alone (sizes / 2): an import's memory stays bounded.
  EXPECT_NE(r.output.find("kb1_9_matmul_small_k (traced, sizes / 16)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kb1_1_relu (traced, sizes / 8)"), std::string::npos) << r.output;  // 4096 x 16384 on the CPU
  auto report = nlohmann::json::parse(read_file(out + "/import-report.json"));
  EXPECT_EQ(report["levels"]["1"]["imported"].size(), 7u);
  EXPECT_EQ(report["levels"]["2"]["imported"].size(), 3u);
  EXPECT_EQ(report["levels"]["3"]["imported"].size(), 1u);
  std::string toml = read_file(out + "/kb2_1_linear_relu_scale/task.toml");
  EXPECT_NE(toml.find("parameter = \"linear.weight\""), std::string::npos) << toml;  // state_dict order
  EXPECT_LT(toml.find("parameter = \"scale\""), toml.find("parameter = \"linear.weight\""));
  EXPECT_NE(toml.find("float32 = { atol = 0.01, rtol = 0.01 }"), std::string::npos);  // KernelBench's tolerance
  // Scaled for the CPU (64 -> 32 channels), and a shape built from a scaled constant follows it;
  // BatchNorm's 0-dimensional counter is an input like any buffer; a loss is a 0-dimensional output.
  // ModelNew's arguments, at the sizes leap runs.
  EXPECT_NE(toml.find("[init_inputs]\ncpu = \"[64, 48, 0.5]\""), std::string::npos) << toml;
  toml = read_file(out + "/kb2_3_conv_bias_batchnorm/task.toml");
  EXPECT_NE(toml.find("p_bias_0 = 32"), std::string::npos) << toml;
  EXPECT_NE(toml.find("parameter = \"bn.num_batches_tracked\""), std::string::npos) << toml;
  EXPECT_NE(read_file(out + "/kb1_6_mse_loss/task.toml").find("name = \"out\"\nshape = []"), std::string::npos);

  // A scaled task shows the sizes it runs at beside the problem's own (KernelBench's GPU sizes).
  r = leap({"tasks", "show", "kb1_9_matmul_small_k", "--suite", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(2048, 2048)  (the problem's own: (32768, 32768))"), std::string::npos) << r.output;
  r = leap({"tasks", "show", "kb2_1_linear_relu_scale", "--suite", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the module's 'linear.weight' (fixed values)"), std::string::npos) << r.output;

  // The ModelNew answers try the import (parameters, init inputs, outputs) with PyTorch's own
  // operators, which KernelBench's custom-kernel rule would refuse first.
  const std::string no_rule = dir_.write("no-rule.toml", read_file(config()) + "require_custom_kernel = false\n");
  r = leap({"eval", "--config", no_rule, "--tasks", out, "--candidates", src + "/candidates", "--out",
            dir_.path() + "/ok.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream ok(read_file(dir_.path() + "/ok.jsonl"));
  std::string line;
  int n = 0;
  while (std::getline(ok, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["status"], "ok") << j["task"] << ": " << j["feedback"];
    ++n;
  }
  EXPECT_EQ(n, 13);  // 9 in leap's C ABI, 4 in KernelBench's format (ModelNew)
  EXPECT_NE(r.output.find("| 2 | 6 | 100.0% | 100.0% |"), std::string::npos) << r.output;  // by level

  r = leap({"eval", "--config", no_rule, "--tasks", out, "--candidates", src + "/wrong", "--out",
            dir_.path() + "/wrong.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, std::string> got;
  std::istringstream wrong(read_file(dir_.path() + "/wrong.jsonl"));
  while (std::getline(wrong, line)) {
    auto j = nlohmann::json::parse(line);
    got[j["candidate"]] = j["status"].get<std::string>() + " " + j["check"].get<std::string>();
  }
  EXPECT_EQ(got["kb2_1_linear_relu_scale.no_bias.cpp"], "wrong_answer ");
  EXPECT_EQ(got["kb2_1_linear_relu_scale.zero_weights.cpp"], "cheat_detected input_mutation");
  EXPECT_EQ(got["kb1_7_relu_of_rand.copy.cpp"], "wrong_answer ");
  EXPECT_EQ(got["kb2_1_linear_relu_scale.other_parameters.py"], "runtime_error ");

  // A PyTorch that does not match leap's LibTorch is refused with a message.
  r = leap({"tasks", "import", "kernelbench", src, "--out", out, "--python", "/nonexistent/python3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("no Python with PyTorch"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace leap
