#include "common/device_buckets.h"

#include "common/error.h"

namespace leap {

void channel_cuda_ok(cudaError_t e, const std::string& channel, const char* what) {
  if (e != cudaSuccess) throw LeapError(channel + " weight channel: " + what + ": " + cudaGetErrorString(e));
}

void copy_bucket(const std::vector<WeightTensor>& ts, const std::vector<BucketPiece>& pieces, uint8_t* buf, bool pack,
                 cudaStream_t stream, const std::string& channel) {
  for (const auto& p : pieces) {
    auto* tensor = static_cast<uint8_t*>(ts[p.tensor].data) + p.offset;
    const cudaError_t e = pack ? cudaMemcpyAsync(buf + p.at, tensor, p.bytes, cudaMemcpyDefault, stream)
                               : cudaMemcpyAsync(tensor, buf + p.at, p.bytes, cudaMemcpyDefault, stream);
    channel_cuda_ok(e, channel, pack ? "pack" : "unpack");
  }
}

}  // namespace leap
