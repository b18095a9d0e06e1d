#!/usr/bin/env python3
"""The KernelBench way of building candidates, as the baseline of `leap bench compile-hiding`.

Each candidate source is built with torch.utils.cpp_extension.load_inline under a unique
extension name (one full build per candidate, as KernelBench does for every generated
kernel), wrapped in a small binding that turns torch tensors into the DLTensors of the leap
ABI. Prints one JSON line per candidate: {"name", "build_s", "ok", "error"}.

  kernelbench_load_inline.py --backend cpu|cuda --include DIR [--include DIR] SOURCE...
"""
import argparse
import json
import os
import sys
import tempfile
import time

# Torch tensors to the ABI's DLTensors and one leap_kernel call (LEAP_STREAM(t): the stream).
CALL = r"""
extern "C" int leap_kernel(const DLTensor* inputs, int num_inputs, DLTensor* outputs, int num_outputs, void* stream);

static DLTensor as_dl(const torch::Tensor& t) {
  DLTensor d{};
  d.data = t.data_ptr();
  d.device = {t.is_cuda() ? kDLCUDA : kDLCPU, static_cast<int32_t>(t.is_cuda() ? t.get_device() : 0)};
  d.ndim = static_cast<int32_t>(t.dim());
  d.dtype = {kDLFloat, 32, 1};
  d.shape = const_cast<int64_t*>(t.sizes().data());
  return d;
}

int run(std::vector<torch::Tensor> inputs, std::vector<torch::Tensor> outputs) {
  std::vector<DLTensor> in, out;
  for (auto& t : inputs) in.push_back(as_dl(t));
  for (auto& t : outputs) out.push_back(as_dl(t));
  return leap_kernel(in.data(), static_cast<int>(in.size()), out.data(), static_cast<int>(out.size()),
                     inputs.empty() ? nullptr : LEAP_STREAM(inputs[0]));
}
"""

BINDING = r"""
#include <torch/extension.h>
#include <dlpack/dlpack.h>  // the leap ABI's DLTensor (LibTorch does not always include it)
#include <vector>
#ifdef __CUDACC__  // compiled with the kernel by nvcc: launch on PyTorch's current stream
#include <ATen/cuda/CUDAContext.h>
#define LEAP_STREAM(t) ((t).is_cuda() ? (void*)at::cuda::getCurrentCUDAStream().stream() : nullptr)
#else
#define LEAP_STREAM(t) nullptr
#endif
""" + CALL


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--include", action="append", default=[])
    ap.add_argument("sources", nargs="+")
    args = ap.parse_args()
    try:
        from torch.utils.cpp_extension import load_inline
    except Exception as e:  # noqa: BLE001 - report any import failure the same way
        print(json.dumps({"error": f"torch is not importable: {e}"}))
        return 2
    build_root = tempfile.mkdtemp(prefix="leap-kernelbench-")
    for i, path in enumerate(args.sources):
        with open(path) as f:
            source = f.read()
        name = f"leap_kb_{os.getpid()}_{i}"
        build_dir = os.path.join(build_root, name)
        os.makedirs(build_dir)
        t0 = time.time()
        record = {"name": os.path.basename(path)}
        try:
            kwargs = dict(name=name, cpp_sources=[BINDING], functions=["run"], extra_include_paths=args.include,
                          build_directory=build_dir, verbose=False)
            if args.backend == "cuda":
                kwargs["cuda_sources"] = [source]
            else:
                kwargs["cpp_sources"] = [source, BINDING]
            load_inline(**kwargs)
            record["ok"] = True
        except Exception as e:  # noqa: BLE001 - a failed build is a result, not a crash
            record["ok"] = False
            record["error"] = str(e).strip().splitlines()[-1][:200] if str(e).strip() else type(e).__name__
        record["build_s"] = time.time() - t0
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
