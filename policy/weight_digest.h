// A checksum of weights computed where they live (on the GPU for a policy there): the broadcast's
// check that every rank holds the learner's weights, without moving the model through the host.
#pragma once
#include <string>
#include <vector>

#include "common/weight_channel.h"

namespace leap {

// The tensors' bytes read as 16-bit words in blocks of 4096; per block three exact integer
// moments (sum of w, of w*j, of w*j^2, j = 1..4096: at most 2.3e15, no overflow in int64), all of
// them hashed (BLAKE2b) on the host: any change of one word, or of two swapped words, changes it.
// Not a cryptographic digest of the bytes (no adversary here: it catches ranks that diverged).
// Device tensors on CUDA device `cuda_device` (the policy's; -1: the current one), host tensors
// on the CPU; the same bytes give the same checksum on either (16 hex digits).
std::string moments_checksum(const std::vector<WeightTensor>& ts, int cuda_device = -1);

}  // namespace leap
