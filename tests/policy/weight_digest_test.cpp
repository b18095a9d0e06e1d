// The device-side weights checksum (policy/weight_digest.h): what changes it, what does not, and
// that the GPU computes the CPU's value for the same bytes.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/cuda.h>

#include <cstring>
#include <random>

#include <cstdlib>
#include <thread>

#include "common/error.h"
#include "policy/policy.h"
#include "policy/weight_digest.h"
#include "support/builtin_tasks.h"
#include "support/test_util.h"
#include "tasks/task.h"

namespace leap {
namespace {

// Host tensors over `store`: sizes in 16-bit words.
std::vector<WeightTensor> tensors(std::vector<std::vector<uint16_t>>& store) {
  std::vector<WeightTensor> ts;
  for (size_t i = 0; i < store.size(); ++i)
    ts.push_back({"t" + std::to_string(i), WeightDtype::bf16, {static_cast<int64_t>(store[i].size())}, store[i].data(),
                  store[i].size() * 2, false});
  return ts;
}

std::vector<std::vector<uint16_t>> random_words(std::vector<size_t> sizes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<uint16_t>> out;
  for (size_t n : sizes) {
    out.emplace_back(n);
    for (auto& w : out.back()) w = static_cast<uint16_t>(rng());
  }
  return out;
}

// Sizes: whole blocks and a tail; the second more words than one pass widens at a time.
const std::vector<size_t> kSizes = {4096 * 3 + 17, (size_t{1} << 24) + 4096 + 5, 1};

TEST(WeightDigest, SameBytesSameChecksumAndEveryChangeShows) {
  auto a = random_words(kSizes, 1), b = a;
  const std::string base = moments_checksum(tensors(a));
  EXPECT_EQ(base.size(), 16u);
  EXPECT_EQ(moments_checksum(tensors(b)), base);
  // One word, anywhere: the first, inside a block, the tail beyond the blocks, a later pass, the lone one.
  const std::vector<std::pair<size_t, size_t>> where = {{0, 0}, {0, 4096 + 100}, {0, 4096 * 3 + 16},
                                                         {1, (size_t{1} << 24) + 3}, {1, 5}, {2, 0}};
  for (auto [t, i] : where) {
    b = a;
    b[t][i] ^= 1;  // the lowest bit: one ulp of a bf16 weight
    EXPECT_NE(moments_checksum(tensors(b)), base) << "tensor " << t << " word " << i;
  }
  // Two different words swapped inside one block, and across blocks.
  for (auto [i, k] : std::vector<std::pair<size_t, size_t>>{{10, 11}, {10, 4000}, {10, 4096 + 10}}) {
    b = a;
    if (b[0][i] == b[0][k]) b[0][k] ^= 2;
    else std::swap(b[0][i], b[0][k]);
    EXPECT_NE(moments_checksum(tensors(b)), base) << "swap " << i << " " << k;
  }
  // The same words cut into tensors differently: another checksum (the sizes are part of it).
  std::vector<std::vector<uint16_t>> joined = {a[0]};
  joined[0].insert(joined[0].end(), a[2].begin(), a[2].end());
  std::vector<std::vector<uint16_t>> split = {a[0], a[2]};
  EXPECT_NE(moments_checksum(tensors(joined)), moments_checksum(tensors(split)));
}

TEST(WeightDigest, AnOddByteCountIsAnError) {
  std::vector<uint8_t> bytes(5, 1);
  std::vector<WeightTensor> ts = {{"odd", WeightDtype::f16, {2}, bytes.data(), bytes.size(), false}};
  EXPECT_THROW(moments_checksum(ts), LeapError);
}

TEST(WeightDigest, TheGpuComputesTheCpusValue) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU and a LibTorch built with CUDA";
  auto a = random_words(kSizes, 2);
  auto host = tensors(a);
  std::vector<torch::Tensor> keep;
  auto dev = host;
  for (size_t i = 0; i < dev.size(); ++i) {
    keep.push_back(torch::from_blob(a[i].data(), {static_cast<int64_t>(a[i].size())}, torch::kInt16).to(torch::kCUDA));
    dev[i].data = keep.back().data_ptr();
    dev[i].device = true;
  }
  EXPECT_EQ(moments_checksum(dev), moments_checksum(host));
}

// The LM policy on a GPU: the learner's update reaches the replica through the broadcast, and the
// checksum both report (computed on the GPU) is the CPU's for the same bytes.
TEST(WeightDigest, AnLmPolicyOnTheGpuBroadcastsWithTheGpusChecksum) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU and a LibTorch built with CUDA";
  const Task* relu = test::builtin_task("relu");
  ASSERT_TRUE(relu);
  PolicyConfig c;
  c.kind = "lm";
  c.model = test::source_dir() + "/tests/fixtures/lm/tiny-qwen2";
  c.device = "cuda";
  c.max_new_tokens = 12;
  c.lr = 3e-3;
  c.broadcast_bucket_mb = 1;
  auto learner = make_policy(c, 1), worker = make_policy(c, 1);
  auto g = learner->generate(*relu, Backend::cpu, {}, 1);
  TrainSample sample;
  sample.context = g.context;
  sample.actions = g.actions;
  sample.logprob = g.logprob;
  sample.advantage = 1.0;
  learner->train({sample});
  InProcessWeightChannel ch(2);
  WeightSync got;
  std::thread w([&] { got = broadcast_policy_weights(*worker, ch, false); });
  const WeightSync sent = broadcast_policy_weights(*learner, ch, true);
  w.join();
  EXPECT_EQ(got.checksum, sent.checksum);
  // The same bytes on the host, through the policy's copier: the CPU's moments give the same value.
  auto ts = worker->weight_tensors();
  ASSERT_FALSE(ts.empty());
  ASSERT_TRUE(ts[0].device);
  std::vector<std::vector<uint8_t>> host;
  auto on_host = ts;
  for (auto& t : on_host) {
    host.emplace_back(t.bytes);
    worker->device_copy()->to_host(host.back().data(), t.data, t.bytes);
    t.data = host.back().data();
    t.device = false;
  }
  EXPECT_EQ(moments_checksum(on_host), sent.checksum);
  auto a = learner->generate(*relu, Backend::cpu, {}, 2), b = worker->generate(*relu, Backend::cpu, {}, 2);
  EXPECT_EQ(a.actions, b.actions);
}

}  // namespace
}  // namespace leap
