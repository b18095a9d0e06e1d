// The experience graph memory on a real SQLite file: labels and ranks against hand-computed
// tables, context tiers under a token budget, and a writer killed mid-write.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <sqlite3.h>

#include "common/error.h"
#include "memory/memory.h"
#include "memory_fixture.h"

namespace leap::memory {
namespace {

TEST_F(MemoryTest, LabelsFollowTheStepRatio) {
  Case pred = make("t", "p", "ok", 2.0);
  struct Row {
    double speedup;
    std::string want;
  };
  for (const auto& [s, want] : std::vector<Row>{{2.2, "improvement"},       // r = 1.10
                                                {2.1, "improvement"},       // r = 1.05
                                                {2.05, "marginal"},         // r = 1.025
                                                {2.0, "marginal"},          // r = 1
                                                {1.8, "slight_regression"},  // r = 0.90
                                                {1.7, "slight_regression"},  // r = 0.85
                                                {1.0, "regression"}})       // r = 0.5
    EXPECT_EQ(label_of(make("t", "c", "ok", s), &pred), want) << s;
  EXPECT_EQ(label_of(make("t", "c", "ok", 1.3), nullptr), "first_pass");
  Case failed = make("t", "f", "compile_error", 0);
  EXPECT_EQ(label_of(make("t", "c", "ok", 1.3), &failed), "first_pass");
  EXPECT_EQ(label_of(make("t", "c", "wrong_answer", 0), &pred), "wrong_answer");
  Case cheat = make("t", "c", "cheat_detected", 0);
  cheat.check = Check::stream_escape;
  EXPECT_EQ(label_of(cheat, &pred), "cheat_detected:stream_escape");
  LabelRules strict{1.2, 0.95};
  EXPECT_EQ(label_of(make("t", "c", "ok", 2.2), &pred, strict), "marginal");
  EXPECT_EQ(label_of(make("t", "c", "ok", 1.8), &pred, strict), "regression");
}

TEST_F(MemoryTest, RanksAreSubtreeValuesTimesConfidence) {
  Memory m(path_);
  // A (root, 1.0) -> B (1.5) -> C (failed); A -> D (0.9); E: a root with B's source (1.4).
  int64_t a = m.add(make("t", "src A", "ok", 1.0));
  int64_t b = m.add(make("t", "src B", "ok", 1.5, a, 2));
  int64_t c = m.add(make("t", "src C", "wrong_answer", 0, b, 3));
  int64_t d = m.add(make("t", "src D", "ok", 0.9, a, 2));
  int64_t e = m.add(make("t", "src B", "ok", 1.4));
  m.add(make("other", "src A", "ok", 3.0));  // another task's evaluation is not evidence here
  // Hand-computed: d(C) = 0, d(B) = 0.5 * 1.5 + 0.35 * 0 = 0.75, d(D) = 0.45,
  // d(A) = 0.5 * 1.0 + 0.35 * (0.75 + 0.45) = 0.92, d(E) = 0.7; confidence n / (n + 2) with
  // n = 2 for B's source (B and E), 1 otherwise.
  std::map<int64_t, std::pair<double, double>> want = {
      {b, {0.75, 0.375}}, {e, {0.7, 0.35}}, {a, {0.92, 0.92 / 3}}, {d, {0.45, 0.15}}, {c, {0, 0}}};
  auto ranked = m.ranked("t");
  ASSERT_EQ(ranked.size(), 5u);
  std::vector<int64_t> order;
  for (const auto& r : ranked) {
    order.push_back(r.c.id);
    EXPECT_NEAR(r.value, want.at(r.c.id).first, 1e-12) << r.c.id;
    EXPECT_NEAR(r.rank, want.at(r.c.id).second, 1e-12) << r.c.id;
  }
  EXPECT_EQ(order, (std::vector<int64_t>{b, e, a, d, c}));
  EXPECT_EQ(ranked[0].label, "improvement");
  EXPECT_EQ(ranked[0].evaluations, 2);
  auto st = m.stats();
  EXPECT_EQ(st.cases, 6);
  EXPECT_EQ(st.sources, 4);
  EXPECT_EQ(st.tasks, 2);
  EXPECT_EQ(st.roots, 3);
  EXPECT_EQ(st.by_label["first_pass"], 3);
  EXPECT_EQ(st.by_label["wrong_answer"], 1);
  EXPECT_EQ(st.by_label["slight_regression"], 1);
}

TEST_F(MemoryTest, BadInputIsAClearError) {
  Memory m(path_);
  EXPECT_THROW(m.add(make("t", "x", "ok", 1.0, 99)), LeapError);  // no case 99
  EXPECT_THROW(m.add(make("", "x", "ok", 1.0)), LeapError);
  EXPECT_TRUE(m.cases().empty());
  std::string garbage = (dir_ / "garbage.db").string();
  std::ofstream(garbage) << std::string(4096, '\x5a');
  try {
    Memory bad(garbage);
    FAIL() << "a file that is not a database opened";
  } catch (const LeapError& e) {
    EXPECT_NE(std::string(e.what()).find("garbage.db"), std::string::npos) << e.what();
  }
  ContextRules odd;
  odd.mode = "everything";
  EXPECT_THROW(build_context(m, {"t", "cuda", "", 0, ""}, odd), LeapError);
}

class ContextTest : public MemoryTest {
 protected:
  // `body`: appended to every source (a kernel's length).
  void fill(Memory& m, const std::string& body = "") {
    auto src = [&](const std::string& s) { return s + body; };
    int64_t root = m.add(make("kb_relu", src("relu v1 scalar"), "ok", 1.0));
    auto slow_case = make("kb_relu", src("relu v2 vector=8 scalar tail"), "timeout", 0, root, 2);
    slow_case.feedback = "timeout in relu v2 vector=8 scalar tail\nsecond line";
    int64_t slow = m.add(slow_case);
    fixed_ = m.add(make("kb_relu", src("relu v3 vector=8 masked tail"), "ok", 1.6, slow, 3));
    auto wrong = make("kb_relu", src("relu v4 wrong"), "wrong_answer", 0, fixed_, 4);
    wrong.feedback = "wrong_answer in relu v4 wrong";
    m.add(wrong);
    previous_ = m.add(make("kb_relu", src("relu v5 vector=4"), "ok", 1.2, fixed_, 4));
    m.add(make("kb_gelu", src("gelu best"), "ok", 2.5));
    m.add(make("kb_gelu", src("gelu compile"), "compile_error", 0));
    m.add(make("softmax", src("softmax unrelated"), "ok", 3.0));
  }
  int64_t fixed_ = 0, previous_ = 0;
};

TEST_F(ContextTest, ActiveContextFillsHotWarmColdInOrder) {
  Memory m(path_);
  fill(m);
  auto ctx = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", previous_, ""});
  std::map<std::string, int> tiers;
  for (const auto& it : ctx.items) ++tiers[it.tier];
  ASSERT_FALSE(ctx.items.empty());
  EXPECT_EQ(ctx.items[0].tier, "hot");
  EXPECT_EQ(ctx.items[0].case_id, fixed_);     // the incumbent (the fastest correct) first
  EXPECT_NE(ctx.items[0].text.find("relu v3 vector=8 masked tail"), std::string::npos);
  EXPECT_NE(ctx.items[0].text.find("incumbent"), std::string::npos);
  EXPECT_EQ(ctx.items[1].case_id, previous_);  // then the previous attempt
  EXPECT_EQ(tiers["hot"], 3);  // incumbent v3, previous v5, the best-ranked other (v1)
  const std::string text = ctx.text();
  // Warm: the rest of the task as summaries, and the related task's best (kb_ family), not softmax.
  EXPECT_NE(text.find("[kb_gelu]"), std::string::npos) << text;
  EXPECT_EQ(text.find("softmax"), std::string::npos) << text;
  EXPECT_EQ(text.find("gelu compile"), std::string::npos) << text;
  // Cold: the timeout and its fix, the wrong answer.
  EXPECT_NE(text.find("- timeout: timeout in relu v2 vector=8 scalar tail (1x; fixed in case " + std::to_string(fixed_)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("- wrong_answer: wrong_answer in relu v4 wrong (1x)"), std::string::npos) << text;
  size_t hot = text.find("## Best"), warm = text.find("## Other"), cold = text.find("## Lessons");
  EXPECT_LT(hot, warm);
  EXPECT_LT(warm, cold);
  size_t sum = 0;
  for (const auto& it : ctx.items) sum += it.tokens;
  EXPECT_EQ(sum, ctx.tokens);
}

TEST_F(ContextTest, TheBudgetIsNeverExceededAndSmallerItemsStillFit) {
  Memory m(path_);
  fill(m, "\n" + std::string(1200, '/'));  // sources of ~300 tokens
  for (size_t budget = 0; budget <= 1500; budget += 7) {
    for (const std::string mode : {"active", "passive"}) {
      ContextRules r;
      r.mode = mode;
      r.budget_tokens = budget;
      auto ctx = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", previous_, ""}, r);
      EXPECT_LE(ctx.tokens, budget) << mode;
      size_t counted = 0;
      for (const auto& it : ctx.items) counted += approximate_tokens(it.text);
      EXPECT_EQ(counted, ctx.tokens);
    }
  }
  // A budget too small for any source still carries the one-line summaries and lessons.
  ContextRules tight;
  tight.budget_tokens = 60;
  auto ctx = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", previous_, ""}, tight);
  ASSERT_FALSE(ctx.items.empty());
  for (const auto& it : ctx.items) EXPECT_NE(it.tier, "hot") << it.text;
}

TEST_F(ContextTest, PassiveIsTheHistoryNewestFirstAndNoneIsEmpty) {
  Memory m(path_);
  fill(m);
  ContextRules p;
  p.mode = "passive";
  p.budget_tokens = 100000;
  auto ctx = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", previous_, ""}, p);
  ASSERT_EQ(ctx.items.size(), 5u);  // this task's five attempts
  for (size_t i = 1; i < ctx.items.size(); ++i) EXPECT_GT(ctx.items[i - 1].case_id, ctx.items[i].case_id);
  ContextRules none;
  none.mode = "none";
  EXPECT_TRUE(build_context(m, {"kb_relu", "cuda", "", previous_, ""}, none).items.empty());
  // The graph off: the previous attempt in full with its verdict, nothing from the graph.
  ContextRules off;
  off.mode = "previous";
  auto prev = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", previous_, ""}, off);
  ASSERT_EQ(prev.items.size(), 1u);
  EXPECT_EQ(prev.items[0].case_id, previous_);
  EXPECT_NE(prev.items[0].text.find("previous attempt"), std::string::npos);
  EXPECT_TRUE(build_context(m, {"kb_relu", "cuda", "NVIDIA H200", 0, ""}, off).items.empty());  // turn 1
}

// The context follows the current failure: after a wrong answer, this task's wrong-answer lesson
// comes before its older lessons of other verdicts, with how other tasks fixed a wrong answer (the
// family's first) between them.
TEST_F(ContextTest, LessonsFollowTheCurrentFailure) {
  Memory m(path_);
  m.add(make("kb_relu", "relu slow", "timeout", 0));
  int64_t t2 = m.add(make("kb_relu", "relu broken", "compile_error", 0));
  int64_t w = m.add(make("kb_relu", "relu wrong", "wrong_answer", 0, t2, 2));
  int64_t sw = m.add(make("softmax", "softmax wrong", "wrong_answer", 0));
  m.add(make("softmax", "softmax fixed", "ok", 1.1, sw, 2));
  int64_t gw = m.add(make("kb_gelu", "gelu wrong", "wrong_answer", 0));
  int64_t gf = m.add(make("kb_gelu", "gelu fixed", "ok", 1.7, gw, 2));
  auto ctx = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", w, ""});
  const std::string text = ctx.text();
  const size_t own = text.find("- wrong_answer: wrong_answer in relu wrong (1x)");
  const size_t family = text.find("- [kb_gelu] wrong_answer: wrong_answer in gelu wrong (1x; fixed in case " + std::to_string(gf));
  const size_t other = text.find("- [softmax] wrong_answer: wrong_answer in softmax wrong (1x; fixed in case");
  const size_t older = text.find("- timeout: timeout in relu slow (1x)");
  ASSERT_NE(own, std::string::npos) << text;
  ASSERT_NE(family, std::string::npos) << text;
  ASSERT_NE(other, std::string::npos) << text;
  ASSERT_NE(older, std::string::npos) << text;
  EXPECT_LT(own, family);
  EXPECT_LT(family, other);
  EXPECT_LT(other, older);
  // After a pass the lessons keep their order (the oldest first) and no other task's fix is shown.
  int64_t pass = m.add(make("kb_relu", "relu fixed", "ok", 1.2, w, 3));
  const std::string after = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", pass, ""}).text();
  EXPECT_LT(after.find("- timeout: timeout in relu slow"), after.find("- wrong_answer: wrong_answer in relu wrong")) << after;
  EXPECT_EQ(after.find("[softmax] wrong_answer"), std::string::npos) << after;
}

// Warm experience follows the current failure too: after a timeout, of this task's many correct
// cases the one summary shown is the one that fixed a timeout, though others rank higher.
TEST_F(ContextTest, WarmCasesFollowTheCurrentFailure) {
  Memory m(path_);
  for (int i = 0; i < 4; ++i) m.add(make("kb_relu", "fast " + std::to_string(i), "ok", 3.0 + i));
  int64_t slow = m.add(make("kb_relu", "slow loop", "timeout", 0));
  int64_t fix = m.add(make("kb_relu", "tiled loop", "ok", 1.1, slow, 2));
  int64_t again = m.add(make("kb_relu", "slow again", "timeout", 0));
  ContextRules r;
  r.hot_cases = 1;
  r.warm_cases = 1;
  auto ctx = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", again, ""}, r);
  EXPECT_EQ(case_ids(ctx, "warm"), std::vector<int64_t>{fix}) << ctx.text();
  EXPECT_NE(ctx.text().find("(fixed timeout)"), std::string::npos) << ctx.text();
}

// KOPE's hot tier holds the incumbent: with A (3.0x), B refining A (3.3x) and C (1.2x), B is shown
// in full, first, as the incumbent, and ranks use every case's speed over the reference (B's step
// over A, 1.1, is its label, not its value).
TEST_F(ContextTest, TheIncumbentIsAlwaysInFull) {
  Memory m(path_);
  int64_t a = m.add(make("kb_relu", "kernel A", "ok", 3.0));
  int64_t b = m.add(make("kb_relu", "kernel B", "ok", 3.3, a, 2));
  int64_t c = m.add(make("kb_relu", "kernel C", "ok", 1.2));
  int64_t f = m.add(make("kb_relu", "kernel F", "wrong_answer", 0, c, 2));
  auto ranked = m.ranked("kb_relu");
  std::vector<int64_t> order;
  for (const auto& r : ranked) order.push_back(r.c.id);
  EXPECT_EQ(order, (std::vector<int64_t>{a, b, c, f}));  // d(A) = 1.5 + 0.35 * 1.65 over d(B) = 1.65
  ContextRules one;
  one.hot_cases = 1;
  auto ctx = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", f, ""}, one);
  ASSERT_GE(ctx.items.size(), 3u);
  EXPECT_EQ(ctx.items[0].case_id, b);
  EXPECT_EQ(ctx.items[0].tier, "hot");
  EXPECT_NE(ctx.items[0].text.find("incumbent"), std::string::npos) << ctx.items[0].text;
  EXPECT_NE(ctx.items[0].text.find("kernel B"), std::string::npos);
  EXPECT_EQ(ctx.items[1].case_id, f);  // the previous attempt, with its verdict
  EXPECT_EQ(ctx.items[2].case_id, a);  // then the best-ranked other kernel
  EXPECT_EQ(ctx.items[2].tier, "hot");
}

TEST_F(ContextTest, ASourceIsShownInFullOnce) {
  Memory m(path_);
  int64_t first = m.add(make("kb_relu", "the same kernel", "ok", 1.5));
  int64_t again = m.add(make("kb_relu", "the same kernel", "ok", 1.5, first, 2));  // resubmitted
  auto ctx = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", again, ""});
  size_t full = 0;
  for (const auto& it : ctx.items) full += it.tier == "hot";
  EXPECT_EQ(full, 1u) << ctx.text();
  EXPECT_EQ(ctx.items[0].case_id, again);
}

TEST_F(ContextTest, SameHardwareComesBeforeOtherHardware) {
  Memory m(path_);
  Case a100 = make("kb_relu", "tuned elsewhere", "ok", 5.0);
  a100.gpu = "NVIDIA A100";
  m.add(a100);
  m.add(make("kb_relu", "tuned here", "ok", 1.1));
  auto ctx = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", 0, ""});
  ASSERT_GE(ctx.items.size(), 2u);
  EXPECT_NE(ctx.items[0].text.find("tuned here"), std::string::npos);  // despite its lower rank
  EXPECT_NE(ctx.items[1].text.find("tuned elsewhere"), std::string::npos);
}

// KOPE's graph keeps what each attempt set out to do and the cases that were in its context.
TEST_F(ContextTest, EachTiersCapHoldsWithinTheBudget) {
  Memory m(path_);
  fill(m, "\n" + std::string(400, '/'));  // sources of ~100 tokens
  ContextQuery q{"kb_relu", "cuda", "NVIDIA H200", previous_, "", {"a note on the target", "another note"}};
  auto per_tier = [](const Context& c) {
    std::map<std::string, size_t> t;
    for (const auto& it : c.items) t[it.tier] += it.tokens;
    return t;
  };
  ContextRules open;
  open.budget_tokens = 4000;
  auto uncapped = per_tier(build_context(m, q, open));
  ASSERT_GT(uncapped["hot"], 250u);  // the caps below bind
  ASSERT_GT(uncapped["warm"], 30u);
  ASSERT_GT(uncapped["cold"], 30u);
  for (size_t cap : {0u, 20u, 30u, 120u, 250u}) {
    ContextRules r = open;
    r.hot_tokens = cap ? cap : 1;  // 0 would mean "no cap of its own"
    r.warm_tokens = r.cold_tokens = cap ? cap / 2 + 10 : 1;
    auto ctx = build_context(m, q, r);
    auto t = per_tier(ctx);
    EXPECT_LE(t["hot"], r.hot_tokens);
    EXPECT_LE(t["warm"], r.warm_tokens);
    EXPECT_LE(t["cold"], r.cold_tokens);
    EXPECT_LE(ctx.tokens, r.budget_tokens);
  }
}

TEST_F(ContextTest, TheTargetsNotesAreColdAfterTheLessonsOfTheCurrentFailure) {
  Memory m(path_);
  fill(m);
  auto cuda_h200 = target_notes("cuda", "NVIDIA H200"), cuda_other = target_notes("cuda", "NVIDIA A100-SXM4-80GB");
  ASSERT_FALSE(cuda_other.empty());
  EXPECT_GT(cuda_h200.size(), cuda_other.size());  // cuda.md's notes and cuda-h200.md's
  EXPECT_TRUE(std::any_of(cuda_h200.begin(), cuda_h200.end(), [](const std::string& n) {
    return n.find("H200") != std::string::npos;
  }));
  for (const auto& n : cuda_other) EXPECT_EQ(n.find("H200"), std::string::npos) << n;
  EXPECT_FALSE(target_notes("cpu", "").empty());
  EXPECT_TRUE(target_notes("tpu", "").empty());
  // After a timeout, the timeout's lesson first, then the notes, then the other lessons.
  int64_t timed_out = m.add(make("kb_relu", "relu v6 slow", "timeout", 0, previous_, 5));
  auto ctx = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", timed_out, "", cuda_h200});
  std::vector<std::string> cold;
  for (const auto& it : ctx.items)
    if (it.tier == "cold") cold.push_back(it.text);
  ASSERT_GE(cold.size(), cuda_h200.size() + 2);
  const auto first_note = std::find(cold.begin(), cold.end(), "- " + cuda_h200[0]) - cold.begin();
  ASSERT_GE(first_note, 2);  // the two timeouts (the fixed one first), then the notes in order
  for (long k = 0; k < first_note; ++k) EXPECT_EQ(cold[k].rfind("- timeout:", 0), 0u) << cold[k];
  for (size_t k = 0; k < cuda_h200.size(); ++k) EXPECT_EQ(cold[first_note + k], "- " + cuda_h200[k]);
  EXPECT_EQ(cold.back().rfind("- wrong_answer:", 0), 0u) << cold.back();
  ContextRules previous;
  previous.mode = "previous";  // the graph off: no notes either
  for (const auto& it : build_context(m, {"kb_relu", "cuda", "NVIDIA H200", timed_out, "", cuda_h200}, previous).items)
    EXPECT_EQ(it.tier, "hot");
}

TEST_F(MemoryTest, DecisionsAndRetrievedEdgesAreKept) {
  Memory m(path_);
  int64_t a = m.add(make("t", "src A", "ok", 1.0));
  int64_t b = m.add(make("t", "src B", "ok", 2.0));
  Case c = make("t", "src C", "ok", 2.5, a, 2);
  c.decision = "tile the loop by 8 and vectorise the tail";
  c.retrieved = {b, a};
  int64_t id = m.add(c);
  auto got = m.get(id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->decision, c.decision);
  EXPECT_EQ(got->retrieved, (std::vector<int64_t>{a, b}));
  auto all = m.cases("t");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all.back().retrieved, (std::vector<int64_t>{a, b}));
  EXPECT_TRUE(all.front().retrieved.empty());
  EXPECT_EQ(all.front().decision, "");
  Case bad = make("t", "src D", "ok", 1.0);
  bad.retrieved = {id + 100};
  EXPECT_THROW(m.add(bad), LeapError);
  EXPECT_EQ(m.cases("t").size(), 3u);  // nothing of the refused case was written
}

// A memory written before decisions and profiles were kept opens, its cases read with none, and
// takes new ones.
TEST_F(MemoryTest, ADatabaseFromBeforeDecisionsOpensAndGainsThem) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    const char* old_schema =
        "CREATE TABLE sources(hash TEXT PRIMARY KEY, text TEXT NOT NULL);"
        "CREATE TABLE cases(id INTEGER PRIMARY KEY AUTOINCREMENT, task TEXT NOT NULL, backend TEXT NOT NULL,"
        " gpu TEXT NOT NULL, source_hash TEXT NOT NULL REFERENCES sources(hash), status TEXT NOT NULL,"
        " check_name TEXT NOT NULL, feedback TEXT NOT NULL, speedup REAL NOT NULL, candidate_us REAL NOT NULL,"
        " turn INTEGER NOT NULL, policy TEXT NOT NULL, time REAL NOT NULL,"
        " predecessor INTEGER NOT NULL DEFAULT 0, relation TEXT NOT NULL);"
        "INSERT INTO sources VALUES('h1', 'old kernel');"
        "INSERT INTO cases(task, backend, gpu, source_hash, status, check_name, feedback, speedup, candidate_us, turn,"
        " policy, time, predecessor, relation) VALUES('t', 'cpu', 'x', 'h1', 'ok', 'none', '', 1.5, 10, 1, 'p', 0, 0, '');";
    ASSERT_EQ(sqlite3_exec(db, old_schema, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  Memory m(path_);
  auto all = m.cases();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].source, "old kernel");
  EXPECT_EQ(all[0].decision, "");
  EXPECT_EQ(all[0].bottleneck, "");
  Case c = make("t", "new kernel", "ok", 2.0, all[0].id, 2);
  c.decision = "unroll";
  c.bottleneck = "memory-bound";
  c.retrieved = {all[0].id};
  auto got = m.get(m.add(c));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->decision, "unroll");
  EXPECT_EQ(got->bottleneck, "memory-bound");
  EXPECT_EQ(got->retrieved, std::vector<int64_t>{all[0].id});
}

TEST_F(MemoryTest, AWriterKilledMidWriteLosesNothingItCommitted) {
  int ack[2];
  ASSERT_EQ(::pipe(ack), 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(ack[0]);
    Memory m(path_);
    int64_t prev = 0;
    for (int i = 0;; ++i) {
      prev = m.add(make("t", "source " + std::to_string(i) + std::string(2000, 'x'), i % 3 ? "ok" : "timeout", 1 + i % 5,
                        i % 4 ? prev : 0));
      if (::write(ack[1], &prev, sizeof prev) != sizeof prev) ::_exit(1);
    }
  }
  ::close(ack[1]);
  std::vector<int64_t> acknowledged;
  int64_t id = 0;
  while (acknowledged.size() < 200 && ::read(ack[0], &id, sizeof id) == sizeof id) acknowledged.push_back(id);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ack[0]);
  ASSERT_EQ(acknowledged.size(), 200u);
  Memory again(path_);  // passes the integrity check
  auto all = again.cases("t");
  EXPECT_GE(all.size(), acknowledged.size());
  for (int64_t a : acknowledged) EXPECT_TRUE(again.get(a).has_value()) << a;
  for (const auto& c : all) {
    if (c.predecessor) {
      EXPECT_TRUE(again.get(c.predecessor).has_value());
    }
  }
  EXPECT_GT(again.add(make("t", "after the crash", "ok", 1.0)), acknowledged.back());
}

}  // namespace
}  // namespace leap::memory
