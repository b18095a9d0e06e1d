// The device's matrix products checked at a model's shapes (lm/matmul_check.h). No device here
// computes wrongly on purpose, so the wrong products are made by hand: rows replaced, one row
// emptied, everything scaled by a few per cent, one shape alone wrong.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstdlib>

#include "common/error.h"
#include "lm/matmul_check.h"
#include "lm/model.h"

namespace leap::lm {
namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.vocab = 300, c.hidden = 64, c.intermediate = 176, c.layers = 1, c.heads = 4, c.kv_heads = 2, c.head_dim = 16;
  return c;
}

// Token counts 3 and 40; attention over 3 sequences, a cache of 40, a prompt of 8.
MatmulShapes small() { return MatmulShapes{{3, 40}, 3, 40, 8}; }

std::string wrong_message(const MatmulFn& mm) {
  try {
    check_matmuls(tiny(), torch::kCPU, torch::kFloat32, small(), mm);
  } catch (const LeapError& e) {
    return e.what();
  }
  return "";
}

// fp32: the CPU's own products. bf16: products accumulated in fp32 and rounded once, as a GPU's
// bf16 GEMM makes them; not LibTorch 1.13's own on the CPU, which accumulates a non-transposed
// product in bf16 on a CPU without AVX512 (dy w, [40 x 176] x [176 x 64], 3.8 % off on an AMD EPYC
// with AVX2): a product the check is right to refuse.
TEST(MatmulCheck, TheCpusProductsPassInEveryFormAtEveryShape) {
  const MatmulFn rounded_once = [](const torch::Tensor& a, const torch::Tensor& b) {
    return at::matmul(a.to(torch::kFloat32), b.to(torch::kFloat32)).to(a.scalar_type());
  };
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    auto done = check_matmuls(tiny(), torch::kCPU, dtype, small(), dtype == torch::kBFloat16 ? rounded_once : MatmulFn());
    // projections (64->64 for q and o, 64->32, 64->176, 176->64, 64->300) x 2 row counts x 3 forms,
    // and attention's two products for a decode step and a prefill
    ASSERT_EQ(done.size(), 5u * 2 * 3 + 2 * 2) << c10::toString(dtype);
    for (const auto& r : done) {
      EXPECT_LT(r.row_err, dtype == torch::kFloat32 ? 1e-5 : 1e-2) << r.form << " " << r.m << "x" << r.k << "x" << r.n;
      EXPECT_LT(r.sample_err, dtype == torch::kFloat32 ? 1e-5 : 1e-2) << r.form << " " << r.m << "x" << r.k << "x" << r.n;
    }
    auto forward_head = std::find_if(done.begin(), done.end(), [](const MatmulCheck& r) { return r.form == "x w^T" && r.n == 300; });
    ASSERT_NE(forward_head, done.end());
    EXPECT_EQ(forward_head->k, 64);
    auto prefill_scores = std::find_if(done.begin(), done.end(), [](const MatmulCheck& r) { return r.form == "q k^T" && r.m > 2; });
    ASSERT_NE(prefill_scores, done.end());
    // 3 sequences x 2 KV heads, each with its 2 query heads' 8 prompt tokens, against 40 slots
    EXPECT_EQ(std::vector<int64_t>({prefill_scores->batch, prefill_scores->m, prefill_scores->k, prefill_scores->n}),
              std::vector<int64_t>({6, 16, 16, 40}));
  }
}

TEST(MatmulCheck, AWrongProductIsCaughtAndNamed) {
  // Rows of another product: finite, of the right magnitude, wrong.
  auto shuffled = wrong_message([](const torch::Tensor& a, const torch::Tensor& b) { return at::matmul(a, b).roll(1, 0); });
  EXPECT_NE(shuffled.find("the device's matrix products are wrong at this model's shapes"), std::string::npos) << shuffled;
  EXPECT_NE(shuffled.find("x w^T [3 x 64] x [64 x 32]"), std::string::npos) << shuffled;  // k and v, the first projection
  // One row never written.
  auto empty_row = wrong_message([](const torch::Tensor& a, const torch::Tensor& b) {
    auto c = at::matmul(a, b);
    c[c.size(0) - 1].zero_();
    return c;
  });
  EXPECT_NE(empty_row.find("is off by"), std::string::npos) << empty_row;
  // Five per cent too large everywhere: more than rounding, less than garbage.
  EXPECT_NE(wrong_message([](const torch::Tensor& a, const torch::Tensor& b) { return at::matmul(a, b) * 1.05; }), "");
  // Only the weight gradient of the down projection at 40 tokens.
  auto one_shape = wrong_message([](const torch::Tensor& a, const torch::Tensor& b) {
    auto c = at::matmul(a, b);
    if (a.size(0) == 64 && a.size(1) == 40 && b.size(1) == 176) c.narrow(1, 100, 16).neg_();
    return c;
  });
  EXPECT_NE(one_shape.find("dy^T x [64 x 40] x [40 x 176]"), std::string::npos) << one_shape;
  // Only attention's batched products, one batch entry: named with the batch.
  auto batched = wrong_message([](const torch::Tensor& a, const torch::Tensor& b) {
    auto c = at::matmul(a, b);
    if (c.dim() == 3) c[2].neg_();
    return c;
  });
  EXPECT_NE(batched.find("q k^T [6 x 2 x 16] x [6 x 16 x 40]"), std::string::npos) << batched;
  // A right product whatever its layout passes: the check reads values, not strides.
  EXPECT_EQ(wrong_message([](const torch::Tensor& a, const torch::Tensor& b) { return at::matmul(a, b).transpose(-2, -1).contiguous().transpose(-2, -1); }), "");
}

// The fp64 copies a few rows at a time (as a 7B model's head is checked): the same verdicts.
TEST(MatmulCheck, BlockByBlockTheVerdictsAreTheSame) {
  auto whole = check_matmuls(tiny(), torch::kCPU, torch::kFloat32, small());
  auto blocks = check_matmuls(tiny(), torch::kCPU, torch::kFloat32, small(), {}, 500);
  ASSERT_EQ(whole.size(), blocks.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(whole[i].row_err, blocks[i].row_err, 1e-9) << i;
  const MatmulFn one_row_wrong = [](const torch::Tensor& a, const torch::Tensor& b) {
    auto c = at::matmul(a, b);
    if (c.dim() == 2 && c.size(0) == 40) c[37].mul_(-1);  // in the last block of 500-entry blocks
    if (c.dim() == 3) c[5][1].mul_(-1);                     // the last batch entry's second row
    return c;
  };
  EXPECT_THROW(check_matmuls(tiny(), torch::kCPU, torch::kFloat32, small(), one_row_wrong, 500), LeapError);
}

// A model may fit where the check's largest products do not: such a size is left out and said so;
// any other failure of the device stops the check.
TEST(MatmulCheck, ASizeTheDeviceHasNoMemoryForIsSkippedAndSaid) {
  const MatmulFn no_room_for_the_head = [](const torch::Tensor& a, const torch::Tensor& b) {
    TORCH_CHECK(b.size(-1) != 300, "CUDA out of memory. Tried to allocate 2.50 GiB");
    return at::matmul(a, b);
  };
  auto done = check_matmuls(tiny(), torch::kCPU, torch::kFloat32, small(), no_room_for_the_head);
  const auto skipped = std::count_if(done.begin(), done.end(), [](const MatmulCheck& r) { return r.skipped; });
  EXPECT_EQ(skipped, 2);                     // the head's products, at each of two token counts
  EXPECT_EQ(done.size(), 34u - 2 * 3 + 2);  // the rest checked
  const MatmulFn broken = [](const torch::Tensor& a, const torch::Tensor&) -> torch::Tensor {
    TORCH_CHECK(false, "CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx");
    return a;
  };
  EXPECT_THROW(check_matmuls(tiny(), torch::kCPU, torch::kFloat32, small(), broken), c10::Error);
}

TEST(MatmulCheck, UnderAnMpsShareTheMessageNamesTheShare) {
  ::setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "60", 1);
  auto msg = wrong_message([](const torch::Tensor& a, const torch::Tensor& b) { return at::matmul(a, b).roll(1, 0); });
  ::unsetenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  EXPECT_NE(msg.find("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=60"), std::string::npos) << msg;
  EXPECT_NE(msg.find("choose another share or none"), std::string::npos) << msg;
}

TEST(MatmulCheck, OnTheGpuAHalfBillionModelsProductsPass) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU";
  ModelConfig c;  // Qwen2-0.5B's shapes
  c.vocab = 151936, c.hidden = 896, c.intermediate = 4864, c.layers = 24, c.heads = 14, c.kv_heads = 2, c.head_dim = 64;
  auto done = check_matmuls(c, torch::kCUDA, torch::kBFloat16);
  EXPECT_EQ(done.size(), 5u * 3 * 3 + 2 * 2);  // q and o share 896 -> 896; attention's two, twice
}

}  // namespace
}  // namespace leap::lm
