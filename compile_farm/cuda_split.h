// Splits a CUDA candidate into a device pass for NVRTC (tens of ms) and a host pass for the
// host C++ compiler, so most candidates avoid a full nvcc build (~1.5 s). Conservative: when
// the source uses anything the split cannot carry faithfully (templated or overloaded kernels,
// __constant__ memory, headers NVRTC lacks) it returns nothing and the farm uses nvcc.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace leap {

struct CudaSplit {
  // The candidate without its host functions (NVRTC accepts none), every kernel given C linkage.
  std::string device_source;
  // The candidate with device code removed, kernels reduced to declarations and every
  // `k<<<grid, block, shared, stream>>>(args)` rewritten to a launch through the CUDA runtime
  // of the kernel loaded from the embedded NVRTC image (include/leap/detail/nvrtc_host.h).
  std::string host_source;
  std::vector<std::string> kernels;
};

// Lines keep their numbers in both passes. `why` (if given) says what forced nvcc. `torch`: the
// source is a load_inline extension's, whose host code may include PyTorch's headers.
std::optional<CudaSplit> split_cuda_source(const std::string& source, std::string* why = nullptr, bool torch = false);

// Headers a device pass may include: NVRTC gets them from leap (see compile_farm/nvrtc_process.cpp).
const std::vector<std::string>& nvrtc_supported_headers();

}  // namespace leap
