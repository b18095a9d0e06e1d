// The `leap` binary as users run it: leap eval and the command line's exit codes and messages.
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

TEST_F(Cli, CandidateFailuresAreDataOneRecordEach) {
  std::string fx = test::source_dir() + "/tests/fixtures/hostile/cpu/";
  std::string jsonl = json_line("relu", "good", test::source_dir() + "/examples/cpu/relu.cpp") +
                      json_line("relu", "segv", fx + "relu.segfault.cpp") +
                      json_line("relu", "broken", fx + "relu.compile_error.cpp") +
                      json_line("softmax", "good-softmax", test::source_dir() + "/examples/cpu/softmax.cpp");
  auto in = dir_.write("cands.jsonl", jsonl);
  auto out = dir_.path() + "/results.jsonl";
  auto r = leap({"eval", "--config", config(), "--candidates", in, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("correct: 50.0%"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("geomean speedup"), std::string::npos) << r.output;
  std::map<std::string, std::string> status;
  std::ifstream results(out);
  for (std::string line; std::getline(results, line);) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(status.count(j["candidate"]), 0u) << "two records for " << j["candidate"];
    status[j["candidate"]] = j["status"];
    for (const char* k : {"task", "feedback", "trials", "speedup", "stages", "candidate_timing", "reference_timing"})
      EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(status, (std::map<std::string, std::string>{
                        {"good", "ok"}, {"segv", "runtime_error"}, {"broken", "compile_error"}, {"good-softmax", "ok"}}));
}

TEST_F(Cli, EvalRecordsEveryOutcomeInTheMemoryAndMemoryShowsIt) {
  std::string fx = test::source_dir() + "/tests/fixtures/hostile/cpu/";
  std::string jsonl = json_line("relu", "good", test::source_dir() + "/examples/cpu/relu.cpp") +
                      json_line("relu", "segv", fx + "relu.segfault.cpp") +
                      json_line("relu", "broken", fx + "relu.compile_error.cpp");
  auto in = dir_.write("cands.jsonl", jsonl);
  const std::string db = dir_.path() + "/memory.db";
  for (int run = 0; run < 2; ++run) {  // a second run adds to the same graph
    auto r = leap({"eval", "--config", config(), "--candidates", in, "--memory", db, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  auto st = leap({"memory", "stats", "--path", db});
  ASSERT_EQ(st.exit_code, 0) << st.output;
  EXPECT_NE(st.output.find("6 cases of 1 tasks (3 distinct sources, 6 roots)"), std::string::npos) << st.output;
  EXPECT_NE(st.output.find("| runtime_error | 2 |"), std::string::npos) << st.output;
  EXPECT_NE(st.output.find("| compile_error | 2 |"), std::string::npos) << st.output;
  auto show = leap({"memory", "show", "--path", db, "--task", "relu"});
  ASSERT_EQ(show.exit_code, 0) << show.output;
  // The good candidate first: evaluated twice, confidence 2 / (2 + 2).
  auto first_row = show.output.substr(show.output.find("|---:|") + 1);
  first_row = first_row.substr(first_row.find('\n') + 1);
  first_row = first_row.substr(0, first_row.find('\n'));
  EXPECT_NE(first_row.find("| ok | "), std::string::npos) << show.output;
  EXPECT_NE(first_row.find("| first_pass | "), std::string::npos) << show.output;
  EXPECT_NE(first_row.find("| 0.50 |"), std::string::npos) << show.output;
  // Without --task: every task's cases in turn, under its name.
  auto all = leap({"memory", "show", "--path", db});
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_NE(all.output.find("## relu"), std::string::npos) << all.output;
  EXPECT_NE(all.output.find("| ok | "), std::string::npos) << all.output;
  auto ex = leap({"memory", "export", "--path", db, "--task", "relu"});
  ASSERT_EQ(ex.exit_code, 0) << ex.output;
  size_t lines = 0;
  std::istringstream is(ex.output);
  for (std::string line; std::getline(is, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line);
    EXPECT_FALSE(j["source"].get<std::string>().empty());
    ++lines;
  }
  EXPECT_EQ(lines, 6u);
  auto none = leap({"memory", "stats", "--path", dir_.path() + "/absent.db"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("no database at"), std::string::npos) << none.output;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/absent.db"));
  auto bad = leap({"memory", "stats", "--path", in});  // not a database
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("not a database"), std::string::npos) << bad.output;
}

TEST_F(Cli, BadInputsExitNonZeroWithAClearMessage) {
  auto bad_cfg = dir_.write("bad.toml", "[eval]\ntrials = -1\n");
  auto r = leap({"eval", "--config", bad_cfg});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("bad.toml:2: field 'eval.trials'"), std::string::npos) << r.output;

  auto bad_jsonl = dir_.write("bad.jsonl", "{\"task\": \"relu\", \"source\": \"x\"}\n{not json\n");
  r = leap({"eval", "--candidates", bad_jsonl});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("bad.jsonl:2: not valid JSON"), std::string::npos) << r.output;

  auto stray = dir_.write("stray.jsonl", "{\"task\": \"no_such_task\", \"source\": \"x\"}\n");
  r = leap({"eval", "--candidates", stray});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("task 'no_such_task'"), std::string::npos) << r.output;

  r = leap({"eval", "--tasks", dir_.path() + "/missing"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("missing: not a task folder"), std::string::npos) << r.output;

  r = leap({"eval", "--backend", "tpu"});
  EXPECT_EQ(r.exit_code, 2);  // a usage error exits 2, as for other tools (not CLI11's 105)
}

// A suite of some of the built-in tasks with the default candidates: the bundled examples of its
// tasks are evaluated and the rest are said to be skipped (candidates a user names must all fit).

TEST_F(Cli, EvalOfASuiteTakesTheBundledExamplesOfItsTasks) {
  auto r = leap({"eval", "--tasks", "layouts", "--config", config(), "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("11 of the"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bundled examples are for tasks of layouts"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("11 candidates in"), std::string::npos) << r.output;
}

// leap's own failure (here: an evaluator that cannot run) is never a candidate's verdict: the
// record says infra_error, the rates leave it out, and the exit status says leap failed.

TEST_F(Cli, EvalExitsThreeWhenLeapFailedAndStillWritesEveryRecord) {
  const char* evald = std::getenv("LEAP_EVALD");
  const std::string kept = evald ? evald : "";
  ::setenv("LEAP_EVALD", "/bin/false", 1);
  const std::string out = dir_.path() + "/infra.jsonl";
  auto r = leap({"eval", "--candidates", test::source_dir() + "/examples/cpu/relu.cpp", "--config", config(), "--quiet",
                 "--out", out});
  if (evald) ::setenv("LEAP_EVALD", kept.c_str(), 1);
  else ::unsetenv("LEAP_EVALD");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("rates over the 0 judged candidates; 1 ended in infra_error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 of 1 evaluations ended in infra_error: leap failed, not the candidates"), std::string::npos)
      << r.output;
  auto records = test::read_jsonl(out);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["status"], "infra_error");
}

// On a machine without a usable GPU, `leap eval --backend cuda` stops with one error naming why,
// before any evaluation (it made an infra_error of every candidate).

TEST_F(Cli, EvalOnCudaWithoutAGpuStopsWithOneClearError) {
  if (run_command({test::build_dir() + "/leap-evald", "--backend", "cuda", "--check-device"}, 120).exit_code == 0)
    GTEST_SKIP() << "this machine has a usable GPU";
  const std::string out = dir_.path() + "/cuda.jsonl";
  auto r = leap({"eval", "--backend", "cuda", "--config", config(), "--out", out});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("leap eval --backend cuda: no usable GPU here: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("infra_error"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The table's columns stay aligned whatever the names' lengths; --show-feedback puts a failure's
// first line of feedback under its row.

TEST_F(Cli, EvalTableStaysAlignedAndShowsFeedbackWhenAsked) {
  const std::string relu = read_file(test::source_dir() + "/examples/cpu/relu.cpp");
  dir_.write("cands/relu.cpp", relu);
  dir_.write("cands/relu.a_candidate_whose_name_is_longer_than_the_column.cpp", relu);
  dir_.write("cands/relu.segfault.cpp", read_file(test::source_dir() + "/tests/fixtures/hostile/cpu/relu.segfault.cpp"));
  auto r = leap({"eval", "--candidates", dir_.path() + "/cands", "--config", config(), "--show-feedback"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::set<size_t> status_columns;
  int rows = 0;
  std::string line, after_segfault;
  for (bool next = false; std::getline(lines, line);) {
    if (next) after_segfault = line, next = false;
    if (line.rfind("relu ", 0) != 0) continue;
    const auto at = line.find(line.find(" ok ") != std::string::npos ? " ok " : " runtime_error");
    status_columns.insert(at);
    ++rows;
    next = line.find("relu.segfault.cpp") != std::string::npos;
  }
  EXPECT_EQ(rows, 3) << r.output;
  EXPECT_EQ(status_columns.size(), 1u) << r.output;
  EXPECT_EQ(after_segfault, "    the candidate's process ended during call 1, killed by SIGSEGV (Segmentation fault)")
      << r.output;
}

TEST_F(Cli, TheCommandLineSaysWhatIsWrongAndExitsTwo) {
  auto r = leap({"evall"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown command 'evall' for leap; the commands are: eval, tasks, run"), std::string::npos)
      << r.output;
  r = leap({"tasks", "lst"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown command 'lst' for leap ... tasks; the commands are: list, show"), std::string::npos)
      << r.output;
  r = leap({"eval", "--no-such-flag"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--no-such-flag"), std::string::npos) << r.output;
  r = leap({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("leap 0."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(commit "), std::string::npos) << r.output;
  r = leap({"tasks", "render", "all"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--all-to DIR is required"), std::string::npos) << r.output;
  // The Python benches' --help is their own: it lists their options.
  r = leap({"bench", "memory", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--turns"), std::string::npos) << r.output;
}

// The tiny Qwen2 fixture (tests/fixtures/lm, with its tokenizer) through `leap lm`; its greedy
// continuation is the one Hugging Face transformers computed (lm_model_test checks the ids).

}  // namespace
}  // namespace leap
