#include <capnp/message.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <cmath>

#include "judge/check/comparison.h"
#include "judge/device/device.h"
#include "judge/check/tensors.h"
#include "judge/timing/timing.h"

namespace leap {
namespace {

// [eval]'s timing fields with no warm-up time, and neither an over-budget, a precise nor a slow stop:
// each test turns on what it tests.
EvalConfig plain_timing() {
  EvalConfig s;
  s.warmup_ms = 0;
  s.over_budget_samples = 0;
  s.precise_stop_ms = 0;
  s.slow_stop_ratio = 0;
  return s;
}

TEST(TimingStats, MedianQuantilesAndRse) {
  auto s = stats_of({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(s.median_us, 3);
  EXPECT_DOUBLE_EQ(s.mean_us, 3);
  EXPECT_NEAR(s.stddev_us, std::sqrt(2.5), 1e-12);
  // Standard error of the median from the median absolute deviation (1 here).
  EXPECT_NEAR(s.rse, 1.2533 * 1.4826 / std::sqrt(5.0) / 3.0, 1e-12);
  // One preempted call moves the mean's error, not the median's.
  EXPECT_NEAR(stats_of({5, 1, 4, 2, 3, 3000}).rse, stats_of({5, 1, 4, 2, 3, 6}).rse, 1e-12);
  EXPECT_DOUBLE_EQ(s.p10_us, 1);
  EXPECT_DOUBLE_EQ(s.p90_us, 5);
  EXPECT_EQ(s.samples, 5u);
  EXPECT_DOUBLE_EQ(stats_of({1, 2, 3, 4}).median_us, 2.5);
}

TEST(TimingRun, StopsAtTargetOrBudgetAndPropagatesErrors) {
  EvalConfig s = plain_timing();
  s.min_samples = 10;
  s.timing_budget_ms = 50;
  s.rse_target = 0.5;  // easy: reached at the minimum
  int calls = 0;
  auto steady = time_calls([&] { ++calls; volatile double x = 0; for (int i = 0; i < 20000; ++i) x = x + i; return 0; }, s);
  EXPECT_EQ(steady.error, 0);
  EXPECT_EQ(steady.stats.samples, 10u);
  EXPECT_GT(steady.stats.median_us, 0);
  s.rse_target = 1e-9;  // unreachable: the budget ends it
  auto t0 = std::chrono::steady_clock::now();
  auto bounded = time_calls([&] { return 0; }, s);
  EXPECT_GE(bounded.stats.samples, 10u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  int n = 0;
  auto failing = time_calls([&] { return ++n == 5 ? 3 : 0; }, s);
  EXPECT_EQ(failing.error, 3);
}

TEST(CallExcess, CallsThatDidNotWaitAreJudgedAsObservedAndWaitsCountOnlyWhereMostCallsWaited) {
  // 4 calls of 1000 us reported, 200 us of overhead; escaping work adds 300 us to each call's wall.
  const std::vector<double> reported(4, 1000), observed(4, 1500);
  // No call waited: the excess is what was observed.
  auto idle = call_excess(observed, {0, 0, 0, 0}, reported, 200, 10);
  EXPECT_TRUE(idle.as_observed);
  EXPECT_EQ(idle.values, std::vector<double>(4, 300));
  // One call waited 300 us while its kernel ran: it is left out, not credited, so the escape
  // shows on the other three.
  auto some = call_excess(observed, {0, 300, 5, 0}, reported, 200, 10);
  EXPECT_TRUE(some.as_observed);
  EXPECT_EQ(some.unwaited, 3u);
  EXPECT_EQ(some.values, std::vector<double>(3, 300));
  // Most calls waited: each wait is taken off (what a saturated machine leaves).
  auto busy = call_excess(observed, {300, 300, 0, 300}, reported, 200, 10);
  EXPECT_FALSE(busy.as_observed);
  EXPECT_EQ(busy.values, (std::vector<double>{0, 0, 300, 0}));
  // Fewer than 3 calls that did not wait are too few to judge on alone.
  auto two = call_excess({1500, 1500}, {0, 0}, {1000, 1000}, 200, 10);
  EXPECT_FALSE(two.as_observed);
}

// A slow candidate is not called min_samples times: once its timed calls alone have spent the
// budget, over_budget_samples suffice, and one call longer than the warm-up time is its warm-up.
TEST(TimingRun, ASlowCallStopsAtTheOverBudgetSamplesAndWarmsUpOnce) {
  EvalConfig s = plain_timing();
  s.warmup_calls = 3;
  s.warmup_ms = 5;
  s.min_samples = 10;
  s.over_budget_samples = 3;
  s.timing_budget_ms = 20;
  s.rse_target = 1e-9;  // never reached: only the counts and the budget end timing
  int calls = 0;
  auto slow = time_calls([&] { ++calls; std::this_thread::sleep_for(std::chrono::milliseconds(12)); return 0; }, s);
  EXPECT_EQ(slow.error, 0);
  EXPECT_EQ(slow.stats.samples, 3u);
  EXPECT_EQ(calls, 1 + 1 + 3);  // one warm-up call, the batch-size probe, three samples
  s.over_budget_samples = 0;  // 0: min_samples whatever the budget (the old rule)
  EXPECT_EQ(time_calls([&] { std::this_thread::sleep_for(std::chrono::milliseconds(12)); return 0; }, s).stats.samples, 10u);
  // The rule in isolation: the samples' own sum (us) decides, not the judge's time between calls.
  s.over_budget_samples = 3;
  EXPECT_FALSE(timing_done({12000, 12000}, s, 25));         // spent, but two samples
  EXPECT_TRUE(timing_done({12000, 12000, 12000}, s, 40));   // spent, three
  EXPECT_FALSE(timing_done({1, 1, 1}, s, 25));              // fast: the judge's overhead spent it, min_samples holds
  EXPECT_TRUE(timing_done(std::vector<double>(10, 1.0), s, 25));  // min_samples, then the budget
  // Before the budget: once the samples alone spent precise_stop_ms, a median already precise ends it.
  s.timing_budget_ms = 1000;
  s.rse_target = 0.01;
  s.precise_stop_ms = 250;
  EXPECT_TRUE(timing_done({150000, 150300, 149800}, s, 460));    // 450 ms of calls, spread 0.2 %
  EXPECT_FALSE(timing_done({150000, 150300}, s, 310));           // two samples only
  EXPECT_FALSE(timing_done({150000, 180000, 120000}, s, 460));   // spread 20 %: more samples
  EXPECT_FALSE(timing_done({50000, 50100, 49900}, s, 160));      // 150 ms of calls: min_samples holds
  EXPECT_FALSE(timing_done({1, 1, 1}, s, 300));                  // the judge's own time does not count
  s.precise_stop_ms = 0;                                         // off: the budget rule alone
  EXPECT_FALSE(timing_done({150000, 150300, 149800}, s, 460));
  // A candidate clearly slower than its reference (1000 us): five samples, if they say so with margin.
  s.slow_stop_ratio = 2;
  const std::vector<double> three_x = {3000, 3010, 2990, 3005, 2995};
  EXPECT_TRUE(timing_done(three_x, s, 20, 1000));
  EXPECT_FALSE(timing_done({3000, 3010, 2990, 3005}, s, 20, 1000));             // four samples
  EXPECT_FALSE(timing_done({1500, 1510, 1490, 1505, 1495}, s, 20, 1000));       // 1.5x slower: timed as usual
  EXPECT_FALSE(timing_done({3000, 4000, 2000, 3500, 2600}, s, 20, 1000));       // a 5 % median not yet
  EXPECT_FALSE(timing_done(three_x, s, 20, 1000, 0.3));  // the task needs 0.3x: 0.33x is not surely below
  EXPECT_TRUE(timing_done(three_x, s, 20, 1000, 1.0));   // ... a fast_1 task: surely below
  EXPECT_FALSE(timing_done(three_x, s, 20, 0));          // no reference time: the usual rule
  s.slow_stop_ratio = 0;                                 // off
  EXPECT_FALSE(timing_done(three_x, s, 20, 1000));
  s.timing_budget_ms = 20;
  s.rse_target = 1e-9;
  s.over_budget_samples = 50;                               // never more than min_samples
  EXPECT_TRUE(timing_done(std::vector<double>(10, 12000.0), s, 125));
  EXPECT_FALSE(warmup_done(0, 100, s));          // at least one call
  EXPECT_TRUE(warmup_done(1, 12, s));            // one call longer than warmup_ms
  EXPECT_FALSE(warmup_done(2, 4, s));            // not yet warmup_ms
  EXPECT_FALSE(warmup_done(2, 6, s));            // short calls: warmup_calls of them ...
  EXPECT_TRUE(warmup_done(3, 6, s));             // ... and warmup_ms
}

class Spec {
 public:
  Spec(std::vector<int64_t> shape, proto::DType dtype, const char* kind, double a, double b) {
    auto t = msg_.initRoot<proto::TensorSpec>();
    t.setName("x");
    auto s = t.initShape(static_cast<unsigned>(shape.size()));
    for (unsigned i = 0; i < shape.size(); ++i) s.set(i, shape[i]);
    t.setDtype(dtype);
    auto d = t.initDistribution();
    d.setKind(kind);
    d.setA(a);
    d.setB(b);
  }
  proto::TensorSpec::Reader get() { return msg_.getRoot<proto::TensorSpec>().asReader(); }

 private:
  capnp::MallocMessageBuilder msg_;
};

TEST(Tensors, InputsAreSeededFreshAndNeverZero) {
  auto cpu = make_cpu_device();
  Spec spec({64, 64}, proto::DType::FLOAT16, "uniform", -1e-4, 1e-4);  // half rounds many to 0
  auto a = make_input(*cpu, spec.get(), 1);
  EXPECT_EQ(a.scalar_type(), at::kHalf);
  EXPECT_EQ(at::sum(a == 0).item<int64_t>(), 0);
  EXPECT_TRUE(bitwise_equal(a, make_input(*cpu, spec.get(), 1)));
  EXPECT_FALSE(bitwise_equal(a, make_input(*cpu, spec.get(), 2)));
  Spec pos({1000}, proto::DType::FLOAT32, "positive", 0, 1);
  EXPECT_GT(make_input(*cpu, pos.get(), 3).min().item<float>(), 0);
}

TEST(Tensors, PoisonIsDetectedUntilEveryElementIsWritten) {
  auto cpu = make_cpu_device();
  for (auto dtype : {proto::DType::FLOAT32, proto::DType::FLOAT64, proto::DType::FLOAT16, proto::DType::BFLOAT16,
                     proto::DType::INT32}) {
    Spec spec({10, 10}, dtype, "normal", 0, 1);
    auto out = make_poisoned_output(*cpu, spec.get());
    int64_t first = 0;
    EXPECT_EQ(count_poisoned(out, &first), 100);
    EXPECT_EQ(first, 0);
    out.view({-1}).narrow(0, 0, 37).fill_(1);
    EXPECT_EQ(count_poisoned(out, &first), 63);
    EXPECT_EQ(first, 37);
    if (at::isFloatingType(out.scalar_type())) {
      out.fill_(std::nan(""));  // a computed NaN is not the poison
      EXPECT_EQ(count_poisoned(out, &first), 0);
    }
  }
}

TEST(Tensors, TensorOpRuleAgreesWithTheLoop) {
  // The GPU path (tensor ops) and the CPU path (loop) must judge every element alike.
  auto want = at::tensor({10.0f, 10.0f, 0.0f, 1.0f, NAN, INFINITY, -INFINITY, 3.0f, 5.0f});
  auto got = at::tensor({10.1009f, 10.102f, 1e-3f, NAN, NAN, INFINITY, INFINITY, 3.0f, 9.0f});
  Tolerance tol{1e-3, 1e-2};
  auto loop = compare_tensors(got, want, tol);
  auto ops = compare_with_tensor_ops(got, want, tol);
  EXPECT_FALSE(loop.passed);
  EXPECT_EQ(ops.passed, loop.passed);
  EXPECT_EQ(ops.mismatches, loop.mismatches);
  EXPECT_EQ(ops.first_bad, loop.first_bad);
  EXPECT_TRUE(std::isinf(ops.max_abs) && std::isinf(loop.max_abs));
  auto near = at::tensor({1.0f, 2.0f}), near_ref = at::tensor({1.00001f, 2.5f});
  auto a = compare_tensors(near, near_ref, tol), b = compare_with_tensor_ops(near, near_ref, tol);
  EXPECT_EQ(a.first_bad, b.first_bad);
  EXPECT_NEAR(a.max_abs, b.max_abs, 1e-6);
  EXPECT_NEAR(a.max_rel, b.max_rel, 1e-6);
  EXPECT_DOUBLE_EQ(a.out_at_first, b.out_at_first);
}

// The judge's CUDA kernels against the host code they replace; on a machine with a GPU only.
class TensorsOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device visible to LibTorch";
    gpu_ = make_cuda_device(0);
  }
  std::unique_ptr<Device> gpu_;
};

TEST_F(TensorsOnGpu, InputsAreTheHostsValues) {
  auto cpu = make_cpu_device();
  for (auto dtype : {proto::DType::FLOAT32, proto::DType::FLOAT64, proto::DType::FLOAT16, proto::DType::BFLOAT16})
    for (const char* kind : {"uniform", "normal", "positive"}) {
      Spec spec({3, 1000, 1031}, dtype, kind, -1e-3, 2);  // 3 M elements: many rounds of the grid
      auto host = make_input(*cpu, spec.get(), 42);
      auto dev = make_input(*gpu_, spec.get(), 42);
      // Bit for bit in the narrow types; float64 normal values within 1e-12.
      if (dtype == proto::DType::FLOAT64)
        EXPECT_TRUE(at::allclose(host, dev.cpu(), 1e-12, 1e-12)) << kind;
      else
        EXPECT_TRUE(bitwise_equal(host, dev.cpu())) << kind << " " << static_cast<int>(dtype);
      EXPECT_EQ(at::sum(dev == 0).item<int64_t>(), 0) << kind;
      // The pristine copy and the candidate's buffer get the same values from one pass.
      auto a = gpu_->alloc({3, 1000, 1031}, host.scalar_type()), b = gpu_->alloc({3, 1000, 1031}, host.scalar_type());
      fill_inputs(a, b, spec.get(), 42);
      EXPECT_TRUE(bitwise_equal(a, dev));
      EXPECT_TRUE(bitwise_equal(b, dev));
      fill_inputs(a, b, spec.get(), 43);
      EXPECT_FALSE(bitwise_equal(a, dev));
    }
}

TEST_F(TensorsOnGpu, PoisonScanFindsTheFirstUnwrittenElement) {
  for (auto dtype : {proto::DType::FLOAT32, proto::DType::FLOAT64, proto::DType::FLOAT16, proto::DType::INT32}) {
    Spec spec({5000, 1000}, dtype, "normal", 0, 1);
    auto out = make_poisoned_output(*gpu_, spec.get());
    int64_t first = 0;
    EXPECT_EQ(count_poisoned(out, &first), 5000000);
    EXPECT_EQ(first, 0);
    out.view({-1}).narrow(0, 0, 4999990).fill_(1);
    out.view({-1})[4999995].fill_(2);
    EXPECT_EQ(count_poisoned(out, &first), 9);
    EXPECT_EQ(first, 4999990);
    out.fill_(3);
    EXPECT_EQ(count_poisoned(out, &first), 0);
    EXPECT_EQ(first, -1);
  }
}

TEST_F(TensorsOnGpu, CompareKernelJudgesLikeTheLoop) {
  auto dev = gpu_->torch_device();
  Tolerance tol{1e-3, 1e-2};
  auto want = at::tensor({10.0f, 10.0f, 0.0f, 1.0f, NAN, INFINITY, -INFINITY, 3.0f, 5.0f});
  auto got = at::tensor({10.1009f, 10.102f, 1e-3f, NAN, NAN, INFINITY, INFINITY, 3.0f, 9.0f});
  std::vector<std::pair<at::Tensor, at::Tensor>> cases = {{got, want}};
  at::manual_seed(7);
  for (auto type : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    auto ref = at::randn({2, 3000, 1001}).to(type);
    auto out = (ref.to(at::kDouble) * (1 + 0.004 * at::randn(ref.sizes(), at::kDouble))).to(type);
    out.view({-1})[4000001] = 1e4;  // one far outside
    cases.push_back({out, ref});
    cases.push_back({ref.clone(), ref});  // identical: passes
  }
  for (auto& [o, r] : cases) {
    auto loop = compare_tensors(o, r, tol);
    auto kernel = compare_tensors(o.to(dev), r.to(dev), tol);
    EXPECT_EQ(kernel.passed, loop.passed);
    EXPECT_EQ(kernel.mismatches, loop.mismatches);
    EXPECT_EQ(kernel.first_bad, loop.first_bad);
    EXPECT_DOUBLE_EQ(kernel.max_abs, loop.max_abs);
    EXPECT_DOUBLE_EQ(kernel.max_rel, loop.max_rel);
    EXPECT_DOUBLE_EQ(kernel.out_at_first, loop.out_at_first);
    EXPECT_DOUBLE_EQ(kernel.ref_at_first, loop.ref_at_first);
  }
}

TEST(Tensors, DlpackTypesDescribeTheTensors) {
  auto t = at::zeros({3, 5}, at::kFloat);
  auto u = at::zeros({7}, at::kLong);
  EXPECT_EQ(dl_dtype(t).code, kDLFloat);
  EXPECT_EQ(dl_dtype(t).bits, 32);
  EXPECT_EQ(dl_dtype(u).code, kDLInt);
  EXPECT_EQ(dl_dtype(u).bits, 64);
  EXPECT_EQ(dl_dtype(at::zeros({2}, at::kBFloat16)).code, kDLBfloat);
  EXPECT_EQ(dl_dtype(at::zeros({2}, at::kHalf)).bits, 16);
}

}  // namespace
}  // namespace leap
