// leap bench dcp and leap bench compile-hiding as users run them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>

#include "apps/cli_fixture.h"
#include "support/loop_checks.h"

namespace leap {
namespace {

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
  // Two runs at once (--jobs): about half a run's wall is endless choices waiting for the 1 s deadline.
  auto r = leap({"bench", "dcp", "--config", cfg, "--workers", "1", "--seeds", "2", "--eval-every", "1",
                 "--variants", "leap,full,single-turn", "--jobs", "2", "--out", out});
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
  const std::string records = dir_.path() + "/hiding.jsonl";
  auto r = leap({"bench", "compile-hiding", "--count", "6", "--baseline", "0", "--records", records});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Every mode's outcomes, each with its mode; a candidate whose verdict differs between modes is
  // listed with them, and only such a candidate.
  std::map<std::string, std::map<std::string, std::string>> verdicts;  // candidate -> mode -> status
  for (const auto& j : test::read_jsonl(records)) verdicts[j["candidate"]][j["mode"]] = j["status"];
  ASSERT_EQ(verdicts.size(), 6u) << read_file(records);
  const auto moved_at = r.output.find("Verdicts that differ between modes");
  for (const auto& [cand, by_mode] : verdicts) {
    ASSERT_EQ(by_mode.size(), 4u) << cand;
    std::set<std::string> distinct;
    for (const auto& [mode, status] : by_mode) distinct.insert(status);
    const bool listed = moved_at != std::string::npos && r.output.find("| " + cand + " |", moved_at) != std::string::npos;
    EXPECT_EQ(listed, distinct.size() > 1) << cand << "\n" << r.output;
  }
  // One table row per mode: candidates/s, cache hits (0% cold, 100% warm), efficiency in (0, 1];
  // the judges' start outside the mode's clock, beside it (none for the warm mode: the same judge).
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
    const bool warm = std::string(m) == "pipelined-warm";
    double rate = std::stod(rows[m][2]), start = std::stod(rows[m][3]), with_start = std::stod(rows[m][4]),
           eff = std::stod(rows[m][9]);
    EXPECT_GT(rate, 0) << m;
    EXPECT_EQ(start > 0, !warm) << m << ": " << rows[m][3];
    const double wall = std::stod(rows[m][1]);  // printed to 0.05 s
    EXPECT_NEAR(with_start, 6 / (wall + start), 0.01 + with_start * 0.06 / (wall + start)) << m;
    EXPECT_GT(eff, 0) << m;
    EXPECT_LE(eff, 1.05) << m;
    EXPECT_EQ(rows[m][8].rfind(warm ? "100%" : "0%", 0), 0u) << m << ": " << rows[m][8];
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

}  // namespace
}  // namespace leap
