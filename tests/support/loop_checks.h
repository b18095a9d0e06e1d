// Checks of a finished run directory shared by the loop tests: the loop's invariants re-derived
// from outcomes.jsonl alone, metrics per step, and weight checksums from every rank's log.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/run_dir.h"

namespace leap::test {

// A loop test's config: its [run] section, then tests/fixtures/configs/fast-loop.toml.
// `eval_lines` go into the shared [eval] table.
inline std::string loop_config(const std::string& run_section, const std::string& eval_lines = "") {
  std::ifstream in(std::string(LEAP_TEST_SOURCE_DIR) + "/tests/fixtures/configs/fast-loop.toml");
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!eval_lines.empty()) tail.replace(tail.find("[eval]\n"), 7, "[eval]\n" + eval_lines + "\n");
  return run_section + "\n" + tail;
}

// The run directory's JSONL reader, strict: a malformed line fails the test.
using leap::read_jsonl;

struct DcpSeen {
  int easy = 0, medium = 0, hopeless = 0;
};

// Every scheduled rollout-turn has exactly one outcome: turn 1 for all G rollouts; a pruned
// group (fewer than t_min or more than t_max turn-1 failures, or all G failing unless
// refine_all_failed) nothing more; a medium group's turn t+1 exactly the rollouts still unsolved
// after turn t, up to T.
inline DcpSeen check_outcome_invariants(const std::string& run_dir, int G, int T, int t_min, int t_max,
                                        bool refine_all_failed = false) {
  std::map<uint64_t, std::map<int, std::map<int, bool>>> groups;  // group -> turn -> rollout -> correct
  for (const auto& o : read_jsonl(run_dir + "/outcomes.jsonl")) {
    auto& turn = groups[o["group"].get<uint64_t>()][o["turn"].get<int>()];
    int r = o["rollout"].get<int>();
    EXPECT_EQ(turn.count(r), 0u) << "two outcomes for group " << o["group"] << " rollout " << r << " turn " << o["turn"];
    turn[r] = o["status"] == "ok";
  }
  DcpSeen seen;
  for (const auto& [id, turns] : groups) {
    EXPECT_EQ(turns.count(1), 1u) << "group " << id;
    if (!turns.count(1)) continue;
    EXPECT_EQ(turns.at(1).size(), static_cast<size_t>(G)) << "group " << id << " turn 1";
    int fails = 0;
    for (const auto& [r, ok] : turns.at(1)) fails += ok ? 0 : 1;
    const bool medium = fails >= t_min && fails <= t_max && (refine_all_failed || fails < G);
    (fails < t_min ? seen.easy : medium ? seen.medium : seen.hopeless)++;
    std::set<int> unsolved;
    for (const auto& [r, ok] : turns.at(1))
      if (!ok) unsolved.insert(r);
    for (int t = 2; t <= T + 1; ++t) {
      std::set<int> ran;
      if (turns.count(t))
        for (const auto& [r, ok] : turns.at(t)) ran.insert(r);
      const std::set<int> expected = medium && t <= T ? unsolved : std::set<int>{};
      EXPECT_EQ(ran, expected) << "group " << id << " turn " << t << (medium ? " (medium)" : " (pruned)");
      if (turns.count(t))
        for (const auto& [r, ok] : turns.at(t))
          if (ok) unsolved.erase(r);
    }
  }
  return seen;
}

// Each rank's log: "weights version V checksum C"; all ranks must agree per version.
inline std::map<uint64_t, std::vector<std::string>> checksums_by_version(const std::string& run_dir) {
  std::map<uint64_t, std::vector<std::string>> out;
  std::regex re("weights version (\\d+),? checksum ([0-9a-f]+)");
  for (const auto& e : std::filesystem::directory_iterator(run_dir + "/logs")) {
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_search(line, m, re)) out[std::stoull(m[1])].push_back(m[2]);
    }
  }
  return out;
}

}  // namespace leap::test
