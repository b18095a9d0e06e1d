// A real evaluation pipeline (real g++, real leap-evald processes) with test-sized budgets.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "common/cores.h"
#include "common/log.h"
#include "compile_farm/farm.h"
#include "evaluation/eval_pipeline.h"
#include "support/test_util.h"

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

struct Expectation {
  Status status = Status::infra_error;
  Check check = Check::none;
  std::string text() const { return to_string(status) + (check == Check::none ? "" : " " + to_string(check)); }
};

// "// leap-expect: STATUS [CHECK] [| STATUS [CHECK] ...]" on the first line of every hostile
// fixture: the outcomes it may get (alternatives where the platform decides which comes first,
// e.g. a trapped kernel's fault against the first call's limit).
inline std::vector<Expectation> expectations_of(const CandidateSource& c) {
  std::istringstream in(c.source.substr(0, c.source.find('\n')));
  std::string slashes, tag;
  in >> slashes >> tag;
  EXPECT_EQ(tag, "leap-expect:") << c.origin;
  std::vector<Expectation> out;
  std::vector<std::string> words;
  auto flush = [&] {
    auto s = words.empty() ? std::nullopt : status_from(words[0]);
    auto k = check_from(words.size() > 1 ? words[1] : "");
    EXPECT_TRUE(s.has_value() && k.has_value() && words.size() <= 2) << c.origin << ": malformed leap-expect";
    out.push_back({s.value_or(Status::infra_error), k.value_or(Check::none)});
    words.clear();
  };
  for (std::string w; in >> w;) {
    if (w == "|") flush();
    else words.push_back(w);
  }
  flush();
  return out;
}

// Builds `cands` into the cache first, so that the compilers are not part of what a test measures;
// their results in candidate order.
inline std::vector<CompileResult> compile_first(const LeapConfig& cfg, const std::vector<CandidateSource>& cands,
                                                Backend backend) {
  CompileFarm farm(cfg.compile, make_driver(cfg.compile, backend));
  std::vector<std::shared_future<CompileResult>> jobs;
  for (const auto& c : cands) jobs.push_back(farm.submit({c.name, c.source, backend}));
  std::vector<CompileResult> results;
  for (auto& j : jobs) results.push_back(j.get());
  return results;
}

// Runs `work` from a thread pinned to `core` beside `spinners` busy threads pinned there too: an
// evaluator started in it, and its runners, inherit the core, and wait for it.
inline void on_a_busy_core(int core, int spinners, const std::function<void()>& work) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int i = 0; i < spinners; ++i)
    busy.emplace_back([&] {
      pin_to({core});
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  std::thread working([&] {
    pin_to({core});
    work();
  });
  working.join();
  stop = true;
  for (auto& t : busy) t.join();
}

// Each hostile candidate followed by a copy of `good`, named after it.
inline std::vector<CandidateSource> interleave(const std::vector<CandidateSource>& hostile,
                                               const CandidateSource& good) {
  std::vector<CandidateSource> run;
  for (const auto& h : hostile) {
    run.push_back(h);
    auto g = good;
    g.name = "good-after-" + h.name;
    run.push_back(g);
  }
  return run;
}

// The clean reference of a good candidate: the median (by candidate timing) of three clean
// evaluations in `pipeline` (the first warms the caches). Each must be ok.
inline EvalOutcome clean_run(EvalPipeline& pipeline, const std::vector<Task>& tasks, const CandidateSource& good) {
  auto cleans = pipeline.run(tasks, {good, good, good});
  for (const auto& c : cleans) EXPECT_EQ(c.status, Status::ok) << c.feedback;
  std::sort(cleans.begin(), cleans.end(), [](const EvalOutcome& a, const EvalOutcome& b) {
    return a.candidate_timing.median_us < b.candidate_timing.median_us;
  });
  return cleans.at(1);
}

// One outcome against its candidate's "leap-expect" line, with feedback for any failure.
inline void expect_expected_status(const CandidateSource& c, const EvalOutcome& o) {
  std::string wanted;
  bool matched = false;
  for (const auto& want : expectations_of(c)) {
    matched = matched || (o.status == want.status && o.check == want.check);
    wanted += (wanted.empty() ? "" : " | ") + want.text();
  }
  EXPECT_TRUE(matched) << c.name << ": " << to_string(o.status) << " " << to_string(o.check) << ", expected " << wanted
                       << ": " << o.feedback;
  EXPECT_FALSE(o.feedback.empty() && o.status != Status::ok) << c.name << " gave no feedback";
  // A timing verdict shows its spread: a shift on every call, not load on some.
  if (o.check == Check::stream_escape || o.check == Check::timing_forged) {
    EXPECT_NE(o.feedback.find("calls the excess's 10th-90th percentiles"), std::string::npos)
        << c.name << ": " << o.feedback;
  }
}

// Every candidate of `run` (no honest ones between them) gets its expected status.
inline void expect_statuses(const std::vector<CandidateSource>& run, const std::vector<EvalOutcome>& outcomes) {
  ASSERT_EQ(outcomes.size(), run.size());
  for (size_t i = 0; i < run.size(); ++i) expect_expected_status(run[i], outcomes[i]);
}

// Every hostile candidate has its expected status and check; every good one after it is ok and,
// when `clean` is given, times within `tolerance` of the good candidate's clean run. A good
// candidate timed outside it gets one more chance: a clean run, its attack and it are evaluated
// again (`rerun`), and the repeat must be within `tolerance` of that clean run. Harm an attack does to the next candidate repeats;
// a noisy measurement does not (seen on the CPU: about 1 in 50 evaluations ~1.3x off, attacks or
// not).
inline void expect_hostile_outcomes(
    const std::vector<CandidateSource>& run, const std::vector<EvalOutcome>& outcomes, const EvalOutcome* clean = nullptr,
    double tolerance = 0.10,
    const std::function<std::vector<EvalOutcome>(const std::vector<CandidateSource>&)>& rerun = nullptr) {
  ASSERT_EQ(outcomes.size(), run.size());
  for (size_t i = 0; i + 1 < run.size(); i += 2) {
    expect_expected_status(run[i], outcomes[i]);
    EXPECT_EQ(outcomes[i + 1].status, Status::ok) << run[i + 1].name << ": " << outcomes[i + 1].feedback;
    if (!clean || outcomes[i + 1].status != Status::ok) continue;
    auto ratio_of = [&](const EvalOutcome& g) { return g.candidate_timing.median_us / clean->candidate_timing.median_us; };
    double ratio = ratio_of(outcomes[i + 1]);
    double clean_us = clean->candidate_timing.median_us;
    if (std::abs(ratio - 1) > tolerance && rerun) {
      // Again, beside clean runs of its own: the machine may have changed since the first one
      // (on the 16-core GPU host every good candidate timed 0.84x a clean run made while another
      // test was busy; this 2-core VM's timings jump between two levels ~30 % apart, for a run
      // or for minutes). Rounds of (clean, attack, good), five at most, until one round's good
      // run is within the tolerance of the clean run just before its attack: a level jump decides
      // nothing, an attack that slows the run right after it fails every round. Each round also
      // times a clean run after the good one and compares with the nearer of the two: a jump
      // between the clean run and the good one is then bracketed, while an attack's slowdown
      // (good slower than the clean runs on both sides) still fails.
      auto before = run[i + 1], after = run[i + 1];
      before.name = "clean-before-" + run[i].name;
      after.name = "clean-after-" + run[i].name;
      for (int round = 0; round < 5; ++round) {
        auto again = rerun({before, run[i], run[i + 1], after});
        ASSERT_EQ(again.size(), 4u);
        EXPECT_EQ(again[0].status, Status::ok) << before.name << ": " << again[0].feedback;
        EXPECT_EQ(again[2].status, Status::ok) << run[i + 1].name << " (repeat): " << again[2].feedback;
        EXPECT_EQ(again[3].status, Status::ok) << after.name << ": " << again[3].feedback;
        const double good = again[2].candidate_timing.median_us;
        double c = again[0].candidate_timing.median_us, repeat = good / c;
        if (const double c2 = again[3].candidate_timing.median_us; std::abs(good / c2 - 1) < std::abs(repeat - 1))
          c = c2, repeat = good / c2;
        std::cerr << run[i + 1].name << ": timed " << ratio << "x its clean run, repeated: " << repeat
                  << "x the nearer clean run around it\n";
        if (round == 0 || std::abs(repeat - 1) < std::abs(ratio - 1)) {
          ratio = repeat;
          clean_us = c;
        }
        if (std::abs(ratio - 1) <= tolerance) break;
      }
    }
    EXPECT_NEAR(ratio, 1.0, tolerance) << run[i + 1].name << ": timed " << clean_us * ratio << " us against "
                                       << clean_us << " us clean";
  }
}

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("LEAP_DATA_DIR", source_dir().c_str(), 1); }
  // In candidate order, as the tests are written (several measure a candidate right after
  // another); evaluation as compiles finish has a test of its own.
  std::unique_ptr<EvalPipeline> make(const LeapConfig& cfg, Backend backend = Backend::cpu) {
    auto p = std::make_unique<EvalPipeline>(cfg, backend, build_dir() + "/leap-evald", role_logger("test"));
    p->evaluate_in_order(true);
    return p;
  }
  TempDir cache_;
};

}  // namespace leap::test
