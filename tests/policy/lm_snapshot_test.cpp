// The LM policy's checkpoint snapshot on each device here (from a GPU: pinned host copies): written
// after the policy has trained on, its files hold the state of the moment it was taken, the same as
// a save() then. GPU updates need not be bit-reproducible, so the files are compared, not further
// training.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>
#include <torch/types.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "lm/safetensors.h"
#include "policy/policy.h"
#include "support/builtin_tasks.h"
#include "support/test_util.h"
#include "tasks/task.h"

namespace leap {
namespace {

// AdamW's state in a checkpoint's optimizer.pt, by parameter position: every moment and step count.
struct SavedMoments {
  std::vector<int64_t> steps;
  std::vector<torch::Tensor> exp_avg, exp_avg_sq;
};

template <typename Key>
bool is_key_of(const Key& key, const torch::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;
    text << p.unsafeGetTensorImpl();
    return key == text.str();
  } else {
    return key == static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

SavedMoments read_moments(const std::string& file, const std::vector<torch::Tensor>& shapes) {
  std::vector<torch::Tensor> params;
  for (const auto& s : shapes) params.push_back(torch::zeros_like(s, torch::kCPU));
  torch::optim::AdamW opt(params);
  torch::load(opt, file);
  SavedMoments m;
  for (const auto& p : params) {
    const torch::optim::OptimizerParamState* st = nullptr;
    for (const auto& [key, s] : opt.state())
      if (is_key_of(key, p)) st = s.get();
    if (!st) throw std::runtime_error(file + ": no state for a parameter");
    const auto& a = static_cast<const torch::optim::AdamWParamState&>(*st);
    m.steps.push_back(a.step());
    m.exp_avg.push_back(a.exp_avg().cpu());
    m.exp_avg_sq.push_back(a.exp_avg_sq().cpu());
  }
  return m;
}

TEST(LmSnapshot, ItsFilesHoldTheStateOfItsMomentOnEveryDeviceHere) {
  const Task* relu = test::builtin_task("relu");
  ASSERT_TRUE(relu);
  std::vector<std::string> devices = {"cpu"};
  if (torch::cuda::is_available()) devices.push_back("cuda");
  for (const auto& device : devices) {
    SCOPED_TRACE(device);
    PolicyConfig c;
    c.kind = "lm";
    c.model = test::source_dir() + "/tests/fixtures/lm/tiny-qwen2";
    c.device = device;
    c.dtype = "bfloat16";  // trained through fp32 masters, as on a GPU by default
    c.max_new_tokens = 12;
    c.lr = 3e-3;
    auto a = make_policy(c, 1);
    std::vector<TrainSample> batch;
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      auto g = a->generate(*relu, Backend::cpu, {}, seed);
      TrainSample t;
      t.context = g.context;
      t.actions = g.actions;
      t.logprob = g.logprob;
      t.advantage = seed == 1 ? 1.0 : -1.0;
      batch.push_back(t);
    }
    a->train(batch);
    test::TempDir dir;
    for (int round = 0; round < 2; ++round) {  // the second reuses the first's pinned buffers
      SCOPED_TRACE(round);
      const std::string saved = dir.path() + "/saved-" + std::to_string(round), snap_dir = dir.path() + "/snap-" + std::to_string(round);
      auto snap = a->snapshot();
      ASSERT_TRUE(snap);
      a->save(saved);
      const std::string at_snapshot = weights_checksum(a->weights());
      a->train(batch);
      ASSERT_NE(weights_checksum(a->weights()), at_snapshot);
      snap->write(snap_dir);
      auto b = make_policy(c, 1);
      b->load(snap_dir);
      EXPECT_EQ(weights_checksum(b->weights()), at_snapshot);
      lm::SafetensorsModel ms(snap_dir + "/master-fp32"), mv(saved + "/master-fp32");
      std::vector<torch::Tensor> shapes;
      for (const auto& name : mv.names()) {
        EXPECT_TRUE(torch::equal(ms.tensor(name), mv.tensor(name))) << name;
        shapes.push_back(mv.tensor(name));
      }
      const auto x = read_moments(snap_dir + "/optimizer.pt", shapes), y = read_moments(saved + "/optimizer.pt", shapes);
      EXPECT_EQ(x.steps, y.steps);
      EXPECT_EQ(x.steps.front(), c.epochs * (round + 1));  // an update is `epochs` optimizer steps
      for (size_t i = 0; i < shapes.size(); ++i) {
        EXPECT_TRUE(torch::equal(x.exp_avg[i], y.exp_avg[i])) << i;
        EXPECT_TRUE(torch::equal(x.exp_avg_sq[i], y.exp_avg_sq[i])) << i;
      }
    }
  }
}

}  // namespace
}  // namespace leap
