// The device's matrix products at a model's shapes, checked when a model is put on a GPU. Under an
// MPS share of an H200's SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE 40, 60, 75 or 80 %) cuBLAS returned
// finite but wrong bf16 products for some shapes (docs/lm.md): a learner would train on them
// and a worker sample from them, and nothing downstream could tell. So a model that will compute
// on a device first has that device compute the products it will make and has them checked.
#pragma once
#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "lm/model.h"

namespace leap::lm {

// One product checked: op(A) [m, k] x op(B) [k, n], `batch` of them; `form`: "x w^T" (a layer's
// forward), "dy w" (its input's gradient), "dy^T x" (its weight's gradient, k the tokens), "q k^T"
// and "p v" (attention against a KV cache, batched over sequences x KV heads).
struct MatmulCheck {
  std::string form;
  int64_t batch = 1, m = 0, k = 0, n = 0;
  double row_err = 0;     // the largest, over rows i, of |(C v)_i - (A (B v))_i| / (|C_i| + |(A (B v))_i|) (Freivalds, fp64)
  double sample_err = 0;  // sampled entries against the CPU in fp32, relative to their largest
  bool skipped = false;   // not checked: the device had no memory for this size (`form` says which)
};

// The product under test; default at::matmul. Tests pass a wrong one (no device here computes
// wrongly on purpose).
using MatmulFn = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;

// The sizes checked: token counts of the projections' products (a decode batch, a micro-batch's
// tokens), and attention's: sequences decoded together, cache length, prompt tokens of a prefill.
struct MatmulShapes {
  std::vector<int64_t> rows = {64, 1024, 8192};
  int64_t sequences = 64, cache = 1024, prompt = 512;
};

// Checks every product form of the model's projections (q, k/v, o, gate/up, down, head) and of its
// attention against a KV cache on `device` in `dtype`: each whole product by Freivalds' test in
// fp64 on the device (every row), and a sample of its entries against the CPU in fp32. Throws
// LeapError naming the product, the error and, under an MPS share, the share. Returns what it
// checked; a size the device has no memory for is `skipped`. `block_entries`: the fp64 copies
// are made this many entries at a time.
std::vector<MatmulCheck> check_matmuls(const ModelConfig& c, torch::Device device, torch::ScalarType dtype,
                                       const MatmulShapes& shapes = {}, const MatmulFn& mm = {},
                                       int64_t block_entries = int64_t{1} << 26);

// check_matmuls at the sizes a worker and a learner use (MatmulShapes' defaults), once per process
// for a device, dtype and set of shapes; nothing on the CPU (the reference itself).
void check_device_matmuls_once(const ModelConfig& c, torch::Device device, torch::ScalarType dtype);

}  // namespace leap::lm
