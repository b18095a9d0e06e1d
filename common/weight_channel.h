// Weight broadcast from the learner to the workers, a collective of the learner and every
// worker: NCCL where each of them has its own GPU, MPI otherwise (see apps/run_command.cpp),
// and an in-process channel for roles running as threads.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace leap {

enum class WeightDtype : uint8_t { f32, bf16, f16 };
size_t dtype_bytes(WeightDtype d);
const char* to_string(WeightDtype d);

// A named tensor of a policy, broadcast in place: `data` is its contiguous storage (host memory,
// or CUDA memory when `device`), `bytes` its size.
struct WeightTensor {
  std::string name;
  WeightDtype dtype = WeightDtype::f32;
  std::vector<int64_t> shape;
  void* data = nullptr;
  size_t bytes = 0;
  bool device = false;
};

// "name dtype d0xd1..." per tensor, one a line: what every participant must agree on.
std::string weight_manifest(const std::vector<WeightTensor>& ts);
// Copies between device memory and the host (a policy whose weights are on a GPU provides it):
// device tensors through a channel that moves host memory, and their checksum, go through it.
struct DeviceCopy {
  virtual ~DeviceCopy() = default;
  virtual void to_host(void* host, const void* device, size_t n) const = 0;
  virtual void from_host(void* device, const void* host, size_t n) const = 0;
  // The tensors' checksum computed on their device, so that a broadcast's check does not move the
  // whole model through the host and hash it there (1 GB a sync for a 0.5B bf16 model on every
  // rank); "": none, tensors_checksum reads them through the host.
  virtual std::string device_checksum(const std::vector<WeightTensor>&) const { return ""; }
};

// Checksum of the tensors' bytes (identical on every rank after a broadcast). With a copier that
// has a device checksum, that one; else device tensors are read through `copy` a slice at a time
// (never the whole model on the host); without it, an error.
std::string tensors_checksum(const std::vector<WeightTensor>& ts, const DeviceCopy* copy = nullptr);

// The tensors' bytes in order, cut into buckets of at most `bucket_bytes` (0: one bucket): each
// bucket a list of pieces (tensor index, offset in it, bytes, offset in the bucket).
struct BucketPiece {
  size_t tensor = 0, offset = 0, bytes = 0, at = 0;
};
std::vector<std::vector<BucketPiece>> bucket_plan(const std::vector<WeightTensor>& ts, size_t bucket_bytes);
size_t bucket_size(const std::vector<std::vector<BucketPiece>>& plan);  // the largest bucket's bytes

struct BroadcastStats {
  size_t bytes = 0, buckets = 0;
};

class WeightChannel {
 public:
  virtual ~WeightChannel() = default;
  // Collective: the root's `w` replaces every other participant's (its size, then its bytes).
  void broadcast(std::vector<float>& w, bool root);
  // Collective: the root's tensors replace every other participant's, in place, packed into
  // buckets of at most `bucket_bytes` (a larger tensor is split across buckets). The root's
  // manifest goes first: a participant whose tensors differ in name, dtype, shape or order fails
  // naming the first difference. Host tensors here; a channel that can move device memory says so.
  virtual BroadcastStats broadcast_tensors(const std::vector<WeightTensor>& ts, bool root, size_t bucket_bytes);
  virtual bool moves_device_memory() const { return false; }
  // The same with device tensors over a channel that moves host memory: each bucket is copied out
  // of the root's device memory, broadcast, and copied into the others' (buckets of at most
  // kMaxStagingBytes: the host holds one at a time).
  BroadcastStats broadcast_staged(const std::vector<WeightTensor>& ts, bool root, size_t bucket_bytes,
                                  const DeviceCopy& copy);
  static constexpr size_t kMaxStagingBytes = size_t{256} << 20;
  virtual std::string kind() const = 0;

 protected:
  // Collective: the root's `n` bytes at `data` into every other participant's (`n` equal on all).
  virtual void broadcast_raw(void* data, size_t n, bool root) = 0;
  // The root's manifest to every participant, checked against each one's own.
  void agree_on_manifest(const std::vector<WeightTensor>& ts, bool root);
  // Throws unless every tensor is in host memory (what this channel moves).
  void require_host(const std::vector<WeightTensor>& ts) const;

 private:
  // Packed into host buckets; device tensors through `copy`.
  BroadcastStats broadcast_packed(const std::vector<WeightTensor>& ts, bool root, size_t bucket_bytes, const DeviceCopy* copy);
};

class InProcessWeightChannel : public WeightChannel {
 public:
  explicit InProcessWeightChannel(int participants) : n_(participants) {}
  std::string kind() const override { return "in-process"; }
  void broadcast_raw(void* data, size_t n, bool root) override;
  // Wakes every participant with an error: a role failed and the rest must not wait for it.
  void abort();

 private:
  int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint8_t> data_;
  bool posted_ = false;
  int done_ = 0;
  long round_ = 0;
  bool aborted_ = false;
};

}  // namespace leap
