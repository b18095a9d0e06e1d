#include "policy/weight_digest.h"

#include <torch/types.h>

#include <algorithm>

#include "common/error.h"
#include "common/hash.h"

namespace leap {

std::string moments_checksum(const std::vector<WeightTensor>& ts, int cuda_device) {
  torch::NoGradGuard no_grad;
  constexpr int64_t kBlock = 4096;           // words a block: its moments stay exact in int64
  constexpr int64_t kPass = kBlock * 4096;   // words widened to int64 at a time (128 MiB)
  StreamHash h;
  torch::Tensor j[2][2];  // 1..4096 and its squares, per place (host, device)
  for (const auto& t : ts) {
    if (t.bytes % 2) throw LeapError("moments_checksum: '" + t.name + "' has an odd number of bytes");
    h.part(t.bytes);
    const auto place = !t.device         ? torch::Device(torch::kCPU)
                       : cuda_device >= 0 ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(cuda_device))
                                          : torch::Device(torch::kCUDA);
    auto& jj = j[place.is_cuda()];
    if (!jj[0].defined()) {
      jj[0] = torch::arange(1, kBlock + 1, torch::TensorOptions().dtype(torch::kInt64).device(place));
      jj[1] = jj[0] * jj[0];
    }
    const int64_t n = static_cast<int64_t>(t.bytes / 2);
    auto words = torch::from_blob(t.data, {n}, torch::TensorOptions().dtype(torch::kInt16).device(place));
    for (int64_t at = 0; at < n; at += kPass) {
      auto w = words.slice(0, at, std::min(n, at + kPass)).to(torch::kInt64);
      const int64_t m = w.numel(), full = m / kBlock * kBlock;
      std::vector<torch::Tensor> parts;
      if (full > 0) {
        auto b = w.slice(0, 0, full).view({-1, kBlock});
        parts.push_back(b.sum(1));
        parts.push_back((b * jj[0]).sum(1));
        parts.push_back((b * jj[1]).sum(1));
      }
      if (m > full) {
        auto r = w.slice(0, full);
        parts.push_back(r.sum().view({1}));
        parts.push_back((r * jj[0].slice(0, 0, m - full)).sum().view({1}));
        parts.push_back((r * jj[1].slice(0, 0, m - full)).sum().view({1}));
      }
      auto host = torch::cat(parts).to(torch::kCPU).contiguous();
      h.update(host.data_ptr(), static_cast<size_t>(host.numel()) * sizeof(int64_t));
    }
  }
  return h.hex().substr(0, 16);
}

}  // namespace leap
