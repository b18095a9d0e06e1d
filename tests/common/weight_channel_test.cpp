// Named-tensor weight broadcast: buckets of any size relative to the tensors, the manifest check.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/hash.h"
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

// Device tensors over a channel that moves host memory: staged through the host a bucket at a
// time. Here "device" memory is host memory behind a copier that counts what it moves (the one
// stand-in: no GPU here; the H200 runs the LibTorch copier).
struct CountingCopy : DeviceCopy {
  mutable std::atomic<size_t> out{0}, in{0};
  void to_host(void* host, const void* device, size_t n) const override {
    std::memcpy(host, device, n);
    out += n;
  }
  void from_host(void* device, const void* host, size_t n) const override {
    std::memcpy(device, host, n);
    in += n;
  }
};

TEST(WeightChannel, DeviceTensorsAreStagedThroughTheHostABucketAtATime) {
  for (size_t bucket : {size_t{0}, size_t{7}, size_t{64}, size_t{100000}}) {
    InProcessWeightChannel ch(3);
    Model root(0), a(0xAA), b(0x55);
    root.pattern(static_cast<uint32_t>(bucket) + 7);
    const std::string host_sum = tensors_checksum(root.tensors);
    for (Model* m : {&root, &a, &b})
      for (size_t i : {size_t{0}, size_t{2}}) m->tensors[i].device = true;  // a mix, as a model with host buffers
    CountingCopy copy[3];
    BroadcastStats st[3];
    std::thread ta([&] { st[1] = ch.broadcast_staged(a.tensors, false, bucket, copy[1]); });
    std::thread tb([&] { st[2] = ch.broadcast_staged(b.tensors, false, bucket, copy[2]); });
    st[0] = ch.broadcast_staged(root.tensors, true, bucket, copy[0]);
    ta.join();
    tb.join();
    EXPECT_EQ(a.storage, root.storage) << bucket;
    EXPECT_EQ(b.storage, root.storage) << bucket;
    // Every device byte left the root once and entered each replica once; host tensors were not copied through it.
    const size_t device_bytes = root.tensors[0].bytes + root.tensors[2].bytes;
    EXPECT_EQ(copy[0].out.load(), device_bytes) << bucket;
    EXPECT_EQ(copy[0].in.load(), 0u);
    EXPECT_EQ(copy[1].in.load(), device_bytes) << bucket;
    EXPECT_EQ(copy[2].in.load(), device_bytes) << bucket;
    EXPECT_EQ(st[0].bytes, 2082u);
    EXPECT_EQ(st[0].buckets, bucket_plan(root.tensors, bucket ? bucket : WeightChannel::kMaxStagingBytes).size());
    // The checksum reads device tensors through the copier and equals the host bytes' checksum.
    EXPECT_EQ(tensors_checksum(a.tensors, &copy[1]), host_sum);
    EXPECT_EQ(tensors_checksum(root.tensors, &copy[0]), host_sum);
    EXPECT_THROW(tensors_checksum(a.tensors), LeapError);  // device memory without a copier
  }
}

TEST(WeightChannel, StreamedHashIsTheContentHashWhateverTheSlices) {
  std::string a(100000, '\0'), b = "tail";
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<char>(i * 131 + 7);
  const std::string whole = content_hash({a, b});
  for (size_t slice : {size_t{1}, size_t{333}, size_t{65536}, a.size()}) {
    StreamHash h;
    h.part(a.size());
    for (size_t at = 0; at < a.size(); at += slice) h.update(a.data() + at, std::min(slice, a.size() - at));
    h.part(b.size());
    h.update(b.data(), b.size());
    EXPECT_EQ(h.hex(), whole) << slice;
  }
  EXPECT_NE(content_hash({a.substr(0, 10), a.substr(10, 20)}), content_hash({a.substr(0, 11), a.substr(11, 19)}));
}

}  // namespace
}  // namespace leap
