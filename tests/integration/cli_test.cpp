// The `leap` binary as users run it: exit codes, messages, results files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "common/subprocess.h"
#include "integration/loop_checks.h"
#include "test_util.h"

namespace leap {
namespace {

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

std::string json_line(const std::string& task, const std::string& name, const std::string& path) {
  nlohmann::json j = {{"task", task}, {"name", name}, {"source", read_file(path)}};
  return j.dump() + "\n";
}

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

TEST_F(Cli, BenchDcpRunsTheGridOverSeedsWithColdCachesAndHeldOutTasks) {
  // A miniature of the grid: 4 tasks (1 held out), 2 a step, G=4, 2 steps, 2 seeds, 3 variants.
  // Verdicts must not depend on the machine's load (the variants' first steps are compared), so
  // the call limit keeps its 50 ms floor: a 5 ms floor let slow choices flip between ok and
  // too_slow under CI's load.
  auto cfg = dir_.write("dcp.toml", test::loop_config(R"(
[run]
tasks = ["relu", "softmax", "leaky_relu", "gelu"]
steps = 2
tasks_per_step = 2
seed = 5
[learner]
group_size = 4
)"));
  ::setenv("LEAP_EVALD", (test::build_dir() + "/leap-evald").c_str(), 1);
  auto out = dir_.path() + "/bench";
  auto r = leap({"bench", "dcp", "--config", cfg, "--workers", "1", "--seeds", "2", "--eval-every", "1",
                 "--variants", "leap,full,single-turn", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The split and the target are stated before the table; one row per variant.
  EXPECT_NE(r.output.find("held out: relu"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Targets (fixed before the runs): held-out accuracy at turn 1 >= 0.50 and at turn 3 >= 0.75"),
            std::string::npos) << r.output;
  for (const char* v : {"leap", "full", "single-turn"})
    EXPECT_NE(r.output.find(std::string("| ") + v + " |"), std::string::npos) << v << "\n" << r.output;
  auto first_step = [&](const std::string& v, int seed) {
    return test::read_jsonl(out + "/" + v + "/seed-" + std::to_string(seed) + "/metrics.jsonl").at(0);
  };
  for (int seed : {0, 1}) {
    // Step 1 starts from the same weights and samples in every variant of a seed: single-turn
    // runs exactly B x G, the >=50% range refines only groups with at least 2 of 4 failing,
    // the full range every group with a failure.
    auto ge50 = first_step("leap", seed), full = first_step("full", seed), single = first_step("single-turn", seed);
    EXPECT_EQ(single["evaluations"], 8);
    EXPECT_GE(ge50["evaluations"].get<int>(), 8);
    EXPECT_GE(full["evaluations"].get<int>(), ge50["evaluations"].get<int>());
    EXPECT_EQ(ge50["solve_at"][0], full["solve_at"][0]);
    EXPECT_EQ(ge50["tasks"], single["tasks"]);
    EXPECT_EQ(std::count(ge50["tasks"].begin(), ge50["tasks"].end(), "relu"), 0) << "a held-out task was trained on";
    test::check_outcome_invariants(out + "/leap/seed-" + std::to_string(seed), 4, 3, 2, 4);
    // A cold compile cache per run: nothing of another variant's compiles is found there.
    for (const char* v : {"leap", "full", "single-turn"})
      EXPECT_TRUE(std::filesystem::is_directory(out + "/caches/" + v + "-seed-" + std::to_string(seed))) << v;
  }
  // The seeds are different runs: other samples from the first step on.
  auto choices = [&](int seed) {
    std::vector<std::string> c;
    for (const auto& o : test::read_jsonl(out + "/leap/seed-" + std::to_string(seed) + "/outcomes.jsonl"))
      if (o["step"] == 0) c.push_back(o["task"].get<std::string>() + o["choice"].get<std::string>());
    std::sort(c.begin(), c.end());
    return c;
  };
  EXPECT_NE(choices(0), choices(1));
  // The report: the grid over all 6 runs (held-out curves with their seed bands) besides the charts.
  EXPECT_TRUE(std::filesystem::exists(out + "/report.html"));
  EXPECT_NE(r.output.find("6 run(s), 8 charts"), std::string::npos) << r.output;
  EXPECT_EQ(test::read_jsonl(out + "/leap/seed-1/held_out.jsonl").size(), 3u);  // steps 0, 1, 2
  // A chosen split ([bench] held_out_tasks): an unknown name is refused before any run.
  auto bad = dir_.write("dcp-bad.toml", read_file(cfg) + "[bench]\nheld_out_tasks = [\"gelu\", \"no_such_task\"]\n");
  r = leap({"bench", "dcp", "--config", bad, "--workers", "1", "--out", dir_.path() + "/bench-bad"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("held-out task 'no_such_task' is not among the tasks"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/bench-bad/leap")) << "no run may start";
}

TEST_F(Cli, BenchDcpRunsTheGridWithTheLanguageModelPolicy) {
  // The CPU miniature of the LM grid (configs/dcp-lm.toml on the H200): the tiny Qwen2 fixture
  // stands in for a fine-tuned model; its answers are noise, so every group fails entirely, which
  // is what the invariants need: LEAP prunes all-failed groups (exactly B x G evaluations a step),
  // the other reading refines them to T, and both start from the same samples. 3 tasks (1 held
  // out), 2 a step, G = 4, T = 2, 2 steps, 2 seeds; two runs at once, each a process (--jobs).
  auto r = leap({"bench", "dcp", "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* w : {"kind = \"lm\"", "leap-all-failed", "grpo", "trloo", "leap-turn", "single-turn", "--target-turn1"})
    EXPECT_NE(r.output.find(w), std::string::npos) << w << "\n" << r.output;
  auto cfg = dir_.write("dcp-lm.toml", test::loop_config(R"(
[run]
tasks = ["relu", "softmax", "silu"]
steps = 2
tasks_per_step = 2
seed = 3
[learner]
group_size = 4
max_turns = 2
[bench]
held_out_tasks = ["silu"]
held_out_samples = 2
)"));
  std::string text = read_file(cfg);
  text.replace(text.find("[policy]\n"), 9, "[policy]\nkind = \"lm\"\nmodel = \"" + test::source_dir() +
                                               "/tests/fixtures/lm/tiny-qwen2\"\nmax_new_tokens = 8\n");
  dir_.write("dcp-lm.toml", text);
  ::setenv("LEAP_EVALD", (test::build_dir() + "/leap-evald").c_str(), 1);
  auto out = dir_.path() + "/bench-lm";
  r = leap({"bench", "dcp", "--config", cfg, "--workers", "1", "--seeds", "2", "--eval-every", "1", "--variants",
            "leap,leap-all-failed,leap-turn", "--jobs", "2", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("DCP benchmark, lm policy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 sampled chains per task"), std::string::npos) << r.output;
  // One seed's step-0 turn 1 scores the same weights, prompts and samples in every row.
  EXPECT_NE(r.output.find("Verdict stability: the rows' step-0 held-out acc@1 of one seed (the same weights, prompts and "
                          "samples) differ by 0.000 at most."),
            std::string::npos)
      << r.output;
  for (int seed : {0, 1}) {
    const std::string k = "/seed-" + std::to_string(seed);
    auto leap_m = test::read_jsonl(out + "/leap" + k + "/metrics.jsonl");
    auto all_m = test::read_jsonl(out + "/leap-all-failed" + k + "/metrics.jsonl");
    ASSERT_EQ(leap_m.size(), 2u);
    for (size_t step = 0; step < 2; ++step) {
      EXPECT_EQ(leap_m[step]["evaluations"], 8) << "LEAP refined an all-failed group";
      EXPECT_EQ(leap_m[step]["dcp"]["hopeless"], 2);
      EXPECT_EQ(all_m[step]["evaluations"], 16) << "all-failed groups refined to T";
    }
    test::check_outcome_invariants(out + "/leap" + k, 4, 2, 2, 4);
    test::check_outcome_invariants(out + "/leap-all-failed" + k, 4, 2, 2, 4, true);
    test::check_outcome_invariants(out + "/leap-turn" + k, 4, 2, 2, 4);
    // Turn 1 of step 0: the same prompts and samples in every variant of a seed.
    auto turn1 = [&](const std::string& v) {
      std::vector<std::string> c;
      for (const auto& o : test::read_jsonl(out + "/" + v + k + "/outcomes.jsonl"))
        if (o["step"] == 0 && o["turn"] == 1) c.push_back(o["task"].get<std::string>() + o["choice"].get<std::string>());
      std::sort(c.begin(), c.end());
      return c;
    };
    EXPECT_EQ(turn1("leap"), turn1("leap-all-failed"));
    for (const auto& o : test::read_jsonl(out + "/leap" + k + "/outcomes.jsonl")) EXPECT_NE(o["task"], "silu");
    auto held = test::read_jsonl(out + "/leap" + k + "/held_out.jsonl");
    ASSERT_EQ(held.size(), 3u);
    EXPECT_EQ(held[0]["accuracy"].size(), 2u);  // turns 1 and 2
    EXPECT_EQ(held[0]["turns_used"], 4);        // 2 sampled chains of the held-out task, both failing twice
  }
  EXPECT_TRUE(std::filesystem::exists(out + "/report.html"));
}

TEST_F(Cli, BenchCompileHidingMeasuresEveryModeOnTheSameCandidates) {
  ::setenv("LEAP_EVALD", (test::build_dir() + "/leap-evald").c_str(), 1);
  ::setenv("LEAP_CACHE_DIR", (dir_.path() + "/cache").c_str(), 1);
  auto r = leap({"bench", "compile-hiding", "--count", "6", "--baseline", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // One table row per mode: candidates/s, cache hits (0% cold, 100% warm), efficiency in (0, 1].
  // Then, per mode, candidates / evaluation seconds by status: every candidate in one status.
  std::map<std::string, std::vector<std::string>> rows, by_status;
  std::istringstream in(r.output);
  bool statuses = false;
  for (std::string line; std::getline(in, line);) {
    statuses = statuses || line.rfind("Evaluation by status", 0) == 0;
    if (line.rfind("| ", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream ls(line.substr(2));
    for (std::string c; std::getline(ls, c, '|');) cells.push_back(c.substr(c.find_first_not_of(' ')));
    (statuses ? by_status : rows)[cells[0].substr(0, cells[0].find(' '))] = cells;
  }
  for (const char* m : {"serial", "farm-then-eval", "pipelined", "pipelined-warm"}) {
    ASSERT_TRUE(by_status.count(m)) << m << "\n" << r.output;
    int candidates = 0;
    for (size_t i = 1; i < by_status[m].size(); ++i)
      if (by_status[m][i] != "- ") candidates += std::stoi(by_status[m][i]);
    EXPECT_EQ(candidates, 6) << m << "\n" << r.output;
  }
  for (const char* m : {"serial", "farm-then-eval", "pipelined", "pipelined-warm"}) {
    ASSERT_TRUE(rows.count(m)) << m << "\n" << r.output;
    double rate = std::stod(rows[m][2]), eff = std::stod(rows[m][7]);
    EXPECT_GT(rate, 0) << m;
    EXPECT_GT(eff, 0) << m;
    EXPECT_LE(eff, 1.05) << m;
    EXPECT_EQ(rows[m][6].rfind(std::string(m) == "pipelined-warm" ? "100%" : "0%", 0), 0u) << m << ": " << rows[m][6];
  }
  EXPECT_NE(r.output.find("6 distinct schedule-policy candidates"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("KernelBench-style baseline: skipped (--baseline 0)"), std::string::npos);
  // One mode for a quick look: its rows only, no ratio to a serial run that did not happen.
  r = leap({"bench", "compile-hiding", "--count", "2", "--baseline", "0", "--modes", "pipelined"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("| serial |"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("| farm-then-eval |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| pipelined | "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" | - | - |\n"), std::string::npos) << r.output;  // vs serial, vs load_inline
  EXPECT_NE(r.output.find("| pipelined-warm |"), std::string::npos) << r.output;
  EXPECT_NE(leap({"bench", "compile-hiding", "--modes", "fastest"}).exit_code, 0);
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
  // outputs, a layer stack; ReLU of KernelBench's [0, 1) draw (the identity there: imported with a
  // symmetric draw); and three that cannot be tasks.
  const std::string src = test::source_dir() + "/tests/fixtures/kernelbench", out = dir_.path() + "/kb";
  auto r = leap({"tasks", "import", "kernelbench", src, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("9 task(s) in " + out + " load as leap tasks"), std::string::npos) << r.output;
  // Where CUDA is present the import is for "cpu,cuda" and a refusal names the backend that refused.
  auto refusal = [&](const std::string& file) {
    auto at = r.output.find("failed  L1 " + file + ": ");
    return at == std::string::npos ? std::string() : r.output.substr(at, r.output.find('\n', at) - at);
  };
  EXPECT_NE(refusal("4_random_in_forward.py").find("forward is not deterministic"), std::string::npos) << r.output;
  EXPECT_NE(refusal("5_untraceable.py").find("the trace disagrees"), std::string::npos) << r.output;
  EXPECT_NE(refusal("8_identity.py").find("returns one of its inputs unchanged"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kb1_7_relu_of_rand (traced); inputs drawn from [-1, 1)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[1/12] L1 1_relu.py"), std::string::npos) << r.output;  // progress, problem by problem
  EXPECT_NE(r.output.find("kb1_1_relu (traced, sizes / 8)"), std::string::npos) << r.output;  // 4096 x 16384 on the CPU
  auto report = nlohmann::json::parse(read_file(out + "/import-report.json"));
  EXPECT_EQ(report["levels"]["1"]["imported"].size(), 5u);
  EXPECT_EQ(report["levels"]["2"]["imported"].size(), 3u);
  EXPECT_EQ(report["levels"]["3"]["imported"].size(), 1u);
  std::string toml = read_file(out + "/kb2_1_linear_relu_scale/task.toml");
  EXPECT_NE(toml.find("parameter = \"linear.weight\""), std::string::npos) << toml;  // state_dict order
  EXPECT_LT(toml.find("parameter = \"scale\""), toml.find("parameter = \"linear.weight\""));
  EXPECT_NE(toml.find("float32 = { atol = 0.01, rtol = 0.01 }"), std::string::npos);  // KernelBench's tolerance
  // Scaled for the CPU (64 -> 32 channels), and a shape built from a scaled constant follows it;
  // BatchNorm's 0-dimensional counter is an input like any buffer; a loss is a 0-dimensional output.
  toml = read_file(out + "/kb2_3_conv_bias_batchnorm/task.toml");
  EXPECT_NE(toml.find("p_bias_0 = 32"), std::string::npos) << toml;
  EXPECT_NE(toml.find("parameter = \"bn.num_batches_tracked\""), std::string::npos) << toml;
  EXPECT_NE(read_file(out + "/kb1_6_mse_loss/task.toml").find("name = \"out\"\nshape = []"), std::string::npos);

  r = leap({"tasks", "show", "kb2_1_linear_relu_scale", "--suite", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the module's 'linear.weight' (fixed values)"), std::string::npos) << r.output;

  r = leap({"eval", "--config", config(), "--tasks", out, "--candidates", src + "/candidates", "--out",
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
  EXPECT_EQ(n, 9);
  EXPECT_NE(r.output.find("| 2 | 3 | 100.0% | 100.0% |"), std::string::npos) << r.output;  // by level

  r = leap({"eval", "--config", config(), "--tasks", out, "--candidates", src + "/wrong", "--out",
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

  // A PyTorch that does not match leap's LibTorch is refused with a message.
  r = leap({"tasks", "import", "kernelbench", src, "--out", out, "--python", "/nonexistent/python3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("no Python with PyTorch"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace leap
