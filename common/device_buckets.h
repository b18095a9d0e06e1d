// A bucket's pieces between the tensors and a device buffer, queued on a stream: the packing of
// the weight channels that move device memory (NCCL, CUDA IPC). Built with CUDA only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/weight_channel.h"

namespace leap {

// A failed CUDA call of a weight channel: "<channel> weight channel: <what>: <CUDA's message>".
void channel_cuda_ok(cudaError_t e, const std::string& channel, const char* what);

// `pack`: the tensors' pieces into `buf`; else `buf`'s bytes into the tensors (cudaMemcpyDefault:
// a tensor may be in host or device memory). Asynchronous on `stream`; errors name `channel`.
void copy_bucket(const std::vector<WeightTensor>& ts, const std::vector<BucketPiece>& pieces, uint8_t* buf, bool pack,
                 cudaStream_t stream, const std::string& channel);

}  // namespace leap
