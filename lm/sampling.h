// Drawing tokens: the distribution a policy samples from and one token per row on the device.
#pragma once
#include <ATen/core/Generator.h>
#include <torch/types.h>

#include "lm/model.h"

namespace leap::lm {

// Log-probabilities of the distribution tokens are drawn from, from logits [..., V] (any float
// type; fp32 out): the first `vocab` ids only (0: all), logits / temperature (temperature <= 0:
// the model's own distribution, greedy's argmax), then top-k, then top-p on what is left,
// renormalised; cut tokens get -inf. Differentiable in the logits (the cut itself is not).
torch::Tensor sampling_log_softmax(const torch::Tensor& logits, const SamplingParams& sp);

// One uniform in [0, 1) from a row's host generator.
double uniform01(at::Generator& g);

// One token per row from logits [B, V] and one uniform per row u [B] (double, on the logits'
// device), all on that device (a [B, vocab] round trip to the host per token, and a host sort of
// it for top-p, cost more than the model's step on a GPU): [2, B] double, the token ids and their
// log-probabilities (one copy to the host per step).
torch::Tensor sample_rows(const torch::Tensor& logits, const torch::Tensor& u, const SamplingParams& sp);

}  // namespace leap::lm
