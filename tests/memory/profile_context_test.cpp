// The profiler's counters in the memory ([eval] profile): shown with a correct case, and the
// bottleneck label choosing warm experience.
#include "memory_fixture.h"
#include "report/forest.h"

namespace leap::memory {
namespace {

class ProfileContextTest : public MemoryTest {};

// A correct case's feedback is its profile ([eval] profile): the incumbent is shown with its counters.
TEST_F(ProfileContextTest, AProfiledIncumbentIsShownWithItsCounters) {
  Memory m(path_);
  Case fast = make("kb_relu", "kernel P", "ok", 2.0);
  fast.feedback = "profile (Nsight Compute, one call: 1 kernel launch, 53.6 us): memory-bound\n"
                  "- relu: 53.6 us, occupancy 72%, DRAM 45%, memory 45%, SM 50%: memory-bound\n";
  fast.bottleneck = "memory-bound";
  int64_t p = m.add(fast);
  int64_t w = m.add(make("kb_relu", "kernel W", "wrong_answer", 0, p, 2));
  auto ctx = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", w, ""});
  ASSERT_FALSE(ctx.items.empty());
  EXPECT_EQ(ctx.items[0].case_id, p);
  EXPECT_NE(ctx.items[0].text.find("DRAM 45%"), std::string::npos) << ctx.items[0].text;
  EXPECT_NE(ctx.items[0].text.find("memory-bound"), std::string::npos) << ctx.items[0].text;
}

// After a correct attempt the profiler called memory-bound, the warm tier first shows the case that
// sped up a memory-bound kernel, before better-ranked cases that sped up a compute-bound one.
TEST_F(ProfileContextTest, WarmExperienceFollowsTheProfilersBottleneck) {
  Memory m(path_);
  auto profiled = [](Case c, const std::string& bound) {
    c.feedback = "profile (Nsight Compute, one call: 1 kernel launch, 10.0 us): " + bound + "\n- k: ...\n";
    c.bottleneck = bound;
    return c;
  };
  int64_t mem0 = m.add(profiled(make("kb_relu", "streaming v1", "ok", 1.0), "memory-bound"));
  int64_t mem1 = m.add(make("kb_relu", "streaming v2 vectorised", "ok", 1.3, mem0, 2));
  int64_t cmp0 = m.add(profiled(make("kb_relu", "math v1", "ok", 1.1), "compute-bound"));
  int64_t cmp1 = m.add(make("kb_relu", "math v2 fast intrinsics", "ok", 2.5, cmp0, 2));
  int64_t prev = m.add(profiled(make("kb_relu", "current", "ok", 0.9, mem0, 2), "memory-bound"));
  ContextRules rules;
  rules.hot_cases = 0;  // the incumbent and the previous attempt only
  rules.warm_cases = 1;
  auto ctx = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", prev, ""}, rules);
  const auto warm = case_ids(ctx, "warm");
  ASSERT_EQ(warm.size(), 1u) << ctx.text();
  EXPECT_EQ(warm[0], mem1) << ctx.text();
  EXPECT_NE(ctx.text().find("sped up a memory-bound kernel, case " + std::to_string(mem0)), std::string::npos) << ctx.text();
  // Not profiled, the previous attempt leaves the warm tier to rank alone.
  int64_t plain = m.add(make("kb_relu", "current unprofiled", "ok", 0.9, mem0, 2));
  auto ranked_only = build_context(m, {"kb_relu", "cuda", "NVIDIA H200", plain, ""}, rules);
  for (int64_t id : case_ids(ranked_only, "warm")) EXPECT_NE(id, mem1) << ranked_only.text();
  (void)cmp1;
  // With no such case in this task, another task's is the experience (the family's first).
  Memory lone(path_ + ".lone");
  lone.add(make("kb_relu", "relu best", "ok", 3.0));  // the incumbent
  int64_t lp = lone.add(profiled(make("kb_relu", "relu now", "ok", 0.9), "memory-bound"));
  int64_t lg0 = lone.add(profiled(make("kb_gelu", "gelu streaming v1", "ok", 1.0), "memory-bound"));
  int64_t lg1 = lone.add(make("kb_gelu", "gelu streaming v2 vectorised", "ok", 1.4, lg0, 2));
  auto across = build_context(lone, {"kb_relu", "cuda", "NVIDIA H200", lp, ""}, rules);
  const auto warm_across = case_ids(across, "warm");
  ASSERT_EQ(warm_across.size(), 1u) << across.text();
  EXPECT_EQ(warm_across[0], lg1) << across.text();
  EXPECT_NE(across.text().find("[kb_gelu]"), std::string::npos) << across.text();
}

// The label is the judge's (EvalOutcome::bottleneck), kept for a correct case only, in its own
// column: retrieval never reads it back out of feedback text.
TEST_F(ProfileContextTest, TheProfilersLabelIsKeptWithACorrectCase) {
  EvalOutcome o;
  o.task = "kb_relu";
  o.status = Status::ok;
  o.speedup = 1.5;
  o.bottleneck = "compute-bound";
  o.feedback = "profile (Nsight Compute, one call: 1 kernel launch, 9.0 us): memory-bound\n";
  Memory m(path_);
  auto ok = m.get(m.add(case_of(o, "kernel")));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->bottleneck, "compute-bound");
  o.status = Status::wrong_answer;
  auto wrong = m.get(m.add(case_of(o, "kernel 2")));
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->bottleneck, "");
  Case unprofiled = make("kb_relu", "kernel 3", "ok", 1.0);
  unprofiled.feedback = o.feedback;  // looks like a profile, carries no label
  auto got = m.get(m.add(unprofiled));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->bottleneck, "");
}

// leap report's forest: hovering a case shows its decision and, for a profiled correct one, its
// profile's summary line (the counters' bottleneck); a failed case shows no profile.
TEST_F(ProfileContextTest, TheReportsForestShowsEachCasesDecisionAndProfile) {
  Memory m(path_);
  Case fast = make("kb_relu", "kernel P", "ok", 2.0);
  fast.decision = "vectorise by 4 with float4 loads";
  fast.feedback = "profile (Nsight Compute, one call: 1 kernel launch, 53.6 us): memory-bound\n- relu: ...\n";
  fast.bottleneck = "memory-bound";
  const int64_t p = m.add(fast);
  Case wrong = make("kb_relu", "kernel W", "wrong_answer", 0, p, 2);
  wrong.decision = "unroll the tail";
  const int64_t w = m.add(wrong);
  const std::string svg = report::forest_charts(path_);
  auto title_of = [&](int64_t id) {
    const auto at = svg.find("<title>case " + std::to_string(id) + " ");
    return at == std::string::npos ? std::string() : svg.substr(at, svg.find("</title>", at) - at);
  };
  const std::string tp = title_of(p), tw = title_of(w);
  EXPECT_NE(tp.find("vectorise by 4 with float4 loads"), std::string::npos) << tp;
  EXPECT_NE(tp.find("profile (Nsight Compute, one call: 1 kernel launch, 53.6 us): memory-bound"), std::string::npos) << tp;
  EXPECT_NE(tw.find("unroll the tail"), std::string::npos) << tw;
  EXPECT_EQ(tw.find("profile ("), std::string::npos) << tw;
}

}  // namespace
}  // namespace leap::memory
