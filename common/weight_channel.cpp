#include "common/weight_channel.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string_view>

#include "common/error.h"
#include "common/hash.h"

namespace leap {

size_t dtype_bytes(WeightDtype d) { return d == WeightDtype::f32 ? 4 : 2; }

const char* to_string(WeightDtype d) {
  switch (d) {
    case WeightDtype::f32: return "float32";
    case WeightDtype::bf16: return "bfloat16";
    case WeightDtype::f16: return "float16";
  }
  return "?";
}

std::string weight_manifest(const std::vector<WeightTensor>& ts) {
  std::ostringstream out;
  for (const auto& t : ts) {
    out << t.name << ' ' << to_string(t.dtype) << ' ';
    for (size_t i = 0; i < t.shape.size(); ++i) out << (i ? "x" : "") << t.shape[i];
    out << '\n';
  }
  return out.str();
}

std::string tensors_checksum(const std::vector<WeightTensor>& ts, const DeviceCopy* copy) {
  if (copy)
    if (std::string on_device = copy->device_checksum(ts); !on_device.empty()) return on_device;
  StreamHash h;
  std::vector<uint8_t> slice;
  for (const auto& t : ts) {
    h.part(t.bytes);
    if (!t.device) {
      h.update(t.data, t.bytes);
      continue;
    }
    if (!copy) throw LeapError("tensors_checksum: '" + t.name + "' is in device memory");
    slice.resize(std::min<size_t>(t.bytes, size_t{64} << 20));
    for (size_t at = 0; at < t.bytes; at += slice.size()) {
      const size_t n = std::min(slice.size(), t.bytes - at);
      copy->to_host(slice.data(), static_cast<const uint8_t*>(t.data) + at, n);
      h.update(slice.data(), n);
    }
  }
  return h.hex().substr(0, 16);
}

void WeightChannel::agree_on_manifest(const std::vector<WeightTensor>& ts, bool root) {
  const std::string mine = weight_manifest(ts);
  uint64_t n = root ? mine.size() : 0;
  broadcast_raw(&n, sizeof n, root);
  std::string theirs = root ? mine : std::string(n, '\0');
  broadcast_raw(theirs.data(), n, root);
  if (root || theirs == mine) return;
  std::istringstream a(theirs), b(mine);
  std::string la, lb;
  for (size_t i = 0;; ++i) {
    const bool ha = static_cast<bool>(std::getline(a, la)), hb = static_cast<bool>(std::getline(b, lb));
    if (!ha && !hb) break;
    if (la != lb || ha != hb)
      throw LeapError("weight broadcast: tensor " + std::to_string(i) + " is '" + (hb ? lb : "(none)") + "' here but '" +
                      (ha ? la : "(none)") + "' on the learner: the policies differ");
  }
}

std::vector<std::vector<BucketPiece>> bucket_plan(const std::vector<WeightTensor>& ts, size_t bucket_bytes) {
  size_t total = 0;
  for (const auto& t : ts) total += t.bytes;
  std::vector<std::vector<BucketPiece>> plan;
  if (total == 0) return plan;
  const size_t cap = bucket_bytes ? std::min(bucket_bytes, total) : total;
  size_t used = cap;  // a new bucket first
  for (size_t t = 0; t < ts.size(); ++t)
    for (size_t off = 0; off < ts[t].bytes;) {
      if (used == cap) {
        plan.emplace_back();
        used = 0;
      }
      const size_t n = std::min(ts[t].bytes - off, cap - used);
      plan.back().push_back({t, off, n, used});
      used += n;
      off += n;
    }
  return plan;
}

size_t bucket_size(const std::vector<std::vector<BucketPiece>>& plan) {
  size_t most = 0;
  for (const auto& b : plan) most = std::max(most, b.empty() ? 0 : b.back().at + b.back().bytes);
  return most;
}

void WeightChannel::require_host(const std::vector<WeightTensor>& ts) const {
  for (const auto& t : ts)
    if (t.device) throw LeapError("weight broadcast: '" + t.name + "' is in device memory; the " + kind() + " channel moves host memory");
}

BroadcastStats WeightChannel::broadcast_tensors(const std::vector<WeightTensor>& ts, bool root, size_t bucket_bytes) {
  require_host(ts);
  return broadcast_packed(ts, root, bucket_bytes, nullptr);
}

BroadcastStats WeightChannel::broadcast_staged(const std::vector<WeightTensor>& ts, bool root, size_t bucket_bytes,
                                               const DeviceCopy& copy) {
  return broadcast_packed(ts, root, bucket_bytes == 0 ? kMaxStagingBytes : std::min(bucket_bytes, kMaxStagingBytes), &copy);
}

BroadcastStats WeightChannel::broadcast_packed(const std::vector<WeightTensor>& ts, bool root, size_t bucket_bytes,
                                               const DeviceCopy* copy) {
  agree_on_manifest(ts, root);
  const auto plan = bucket_plan(ts, bucket_bytes);
  std::vector<uint8_t> bucket(bucket_size(plan));
  BroadcastStats st;
  for (const auto& pieces : plan) {
    const size_t used = pieces.back().at + pieces.back().bytes;
    st.bytes += used;
    ++st.buckets;
    if (pieces.size() == 1 && !ts[pieces[0].tensor].device) {  // one range of one host tensor: sent from and into it
      broadcast_raw(static_cast<uint8_t*>(ts[pieces[0].tensor].data) + pieces[0].offset, used, root);
      continue;
    }
    if (root)
      for (const auto& p : pieces) {
        const auto* from = static_cast<const uint8_t*>(ts[p.tensor].data) + p.offset;
        if (ts[p.tensor].device) copy->to_host(bucket.data() + p.at, from, p.bytes);
        else std::memcpy(bucket.data() + p.at, from, p.bytes);
      }
    broadcast_raw(bucket.data(), used, root);
    if (!root)
      for (const auto& p : pieces) {
        auto* to = static_cast<uint8_t*>(ts[p.tensor].data) + p.offset;
        if (ts[p.tensor].device) copy->from_host(to, bucket.data() + p.at, p.bytes);
        else std::memcpy(to, bucket.data() + p.at, p.bytes);
      }
  }
  return st;
}

void WeightChannel::broadcast(std::vector<float>& w, bool root) {
  uint64_t n = root ? w.size() : 0;
  broadcast_raw(&n, sizeof n, root);
  if (!root) w.resize(n);
  broadcast_raw(w.data(), n * sizeof(float), root);
}

void InProcessWeightChannel::broadcast_raw(void* data, size_t n, bool root) {
  std::unique_lock<std::mutex> lock(mu_);
  const long round = round_;
  if (root) {
    data_.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + n);
    posted_ = true;
    cv_.notify_all();
  }
  cv_.wait(lock, [&] { return aborted_ || (posted_ && round_ == round); });
  if (aborted_) throw LeapError("weight broadcast aborted: another role failed");
  if (!root) {
    if (data_.size() != n) throw LeapError("weight broadcast: " + std::to_string(data_.size()) + " bytes sent, " + std::to_string(n) + " expected");
    if (n) std::memcpy(data, data_.data(), n);
  }
  if (++done_ == n_) {  // the last one out opens the next round; nobody enters it before
    done_ = 0;
    posted_ = false;
    ++round_;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return aborted_ || round_ != round; });
    if (aborted_) throw LeapError("weight broadcast aborted: another role failed");
  }
}

void InProcessWeightChannel::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

}  // namespace leap
