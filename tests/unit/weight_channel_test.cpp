// Named-tensor weight broadcast: buckets of any size relative to the tensors, the manifest check.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/weight_channel.h"

namespace leap {
namespace {

// A policy's tensors: float32 3x5, bfloat16 7, float16 1000, float32 2 (raw bytes only here).
struct Model {
  std::vector<std::vector<uint8_t>> storage;
  std::vector<WeightTensor> tensors;
  explicit Model(uint8_t fill) {
    const std::vector<std::tuple<std::string, WeightDtype, std::vector<int64_t>>> spec = {
        {"a.weight", WeightDtype::f32, {3, 5}}, {"b.bias", WeightDtype::bf16, {7}},
        {"c.weight", WeightDtype::f16, {1000}}, {"d.scale", WeightDtype::f32, {2}}};
    storage.reserve(spec.size());
    for (const auto& [name, d, shape] : spec) {
      size_t n = dtype_bytes(d);
      for (auto s : shape) n *= static_cast<size_t>(s);
      storage.emplace_back(n, fill);
      tensors.push_back({name, d, shape, storage.back().data(), n, false});
    }
  }
  void pattern(uint32_t seed) {
    for (auto& s : storage)
      for (auto& b : s) b = static_cast<uint8_t>((seed = seed * 1103515245u + 12345u) >> 16);
  }
};

TEST(WeightChannel, BucketPlansCoverEveryByteOnceInOrder) {
  Model m(0);
  size_t total = 0;
  for (const auto& t : m.tensors) total += t.bytes;  // 60 + 14 + 2000 + 8
  for (size_t bucket : {size_t{0}, size_t{1}, size_t{13}, size_t{60}, size_t{64}, size_t{2082}, size_t{1} << 20}) {
    auto plan = bucket_plan(m.tensors, bucket);
    const size_t cap = bucket == 0 ? total : std::min(bucket, total);
    EXPECT_EQ(plan.size(), (total + cap - 1) / cap) << bucket;
    EXPECT_EQ(bucket_size(plan), cap) << bucket;
    size_t t = 0, off = 0, seen = 0;
    for (const auto& pieces : plan) {
      size_t at = 0;
      for (const auto& p : pieces) {
        if (off == m.tensors[t].bytes) ++t, off = 0;
        EXPECT_EQ(p.tensor, t) << bucket;
        EXPECT_EQ(p.offset, off) << bucket;
        EXPECT_EQ(p.at, at) << bucket;
        off += p.bytes;
        at += p.bytes;
        seen += p.bytes;
      }
      EXPECT_LE(at, cap);
    }
    EXPECT_EQ(seen, total) << bucket;
  }
  EXPECT_TRUE(bucket_plan({}, 64).empty());
}

TEST(WeightChannel, EveryParticipantGetsTheRootsBytesWhateverTheBucket) {
  for (size_t bucket : {size_t{0}, size_t{7}, size_t{64}, size_t{100000}}) {
    InProcessWeightChannel ch(3);
    Model root(0), a(0xAA), b(0x55);
    root.pattern(static_cast<uint32_t>(bucket) + 1);
    BroadcastStats st[3];
    std::thread ta([&] { st[1] = ch.broadcast_tensors(a.tensors, false, bucket); });
    std::thread tb([&] { st[2] = ch.broadcast_tensors(b.tensors, false, bucket); });
    st[0] = ch.broadcast_tensors(root.tensors, true, bucket);
    ta.join();
    tb.join();
    EXPECT_EQ(a.storage, root.storage) << bucket;
    EXPECT_EQ(b.storage, root.storage) << bucket;
    EXPECT_EQ(tensors_checksum(a.tensors), tensors_checksum(root.tensors));
    EXPECT_EQ(st[0].bytes, 2082u);
    EXPECT_EQ(st[1].buckets, st[0].buckets);
    EXPECT_EQ(st[0].buckets, bucket_plan(root.tensors, bucket).size());
  }
}

TEST(WeightChannel, AParticipantWhoseTensorsDifferFailsNamingTheFirstDifference) {
  InProcessWeightChannel ch(2);
  Model root(1), other(0);
  other.tensors[2].shape = {10, 100};  // same bytes, another shape: another model
  std::string error;
  std::thread t([&] {
    try {
      ch.broadcast_tensors(other.tensors, false, 64);
    } catch (const LeapError& e) {
      error = e.what();
      ch.abort();  // the run's error path: the other roles stop waiting
    }
  });
  EXPECT_THROW(ch.broadcast_tensors(root.tensors, true, 64), LeapError);
  t.join();
  EXPECT_NE(error.find("tensor 2 is 'c.weight float16 10x100' here but 'c.weight float16 1000' on the learner"),
            std::string::npos)
      << error;
  EXPECT_EQ(other.storage[2], std::vector<uint8_t>(2000, 0)) << "a mismatched tensor must not be written";
}

TEST(WeightChannel, DeviceTensorsNeedAChannelThatMovesDeviceMemory) {
  InProcessWeightChannel ch(1);
  Model m(0);
  m.tensors[0].device = true;
  EXPECT_FALSE(ch.moves_device_memory());
  try {
    ch.broadcast_tensors(m.tensors, true, 0);
    FAIL() << "expected an error";
  } catch (const LeapError& e) {
    EXPECT_NE(std::string(e.what()).find("'a.weight' is in device memory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace leap
