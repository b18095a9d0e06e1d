#include "lm/sampling.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/DistributionsHelper.h>

#include <limits>
#include <mutex>

namespace leap::lm {

torch::Tensor sampling_log_softmax(const torch::Tensor& logits, const SamplingParams& sp) {
  auto lf = logits.to(torch::kFloat32);
  if (sp.vocab > 0 && sp.vocab < lf.size(-1)) lf = lf.narrow(-1, 0, sp.vocab);
  if (sp.temperature <= 0) return torch::log_softmax(lf, -1);
  auto logp = torch::log_softmax(lf / sp.temperature, -1);
  const bool top_k = sp.top_k > 0 && sp.top_k < lf.size(-1);
  if (!top_k && sp.top_p >= 1.0) return logp;
  torch::Tensor cut;  // true: not in the distribution
  {
    torch::NoGradGuard no_grad;
    auto probs = logp.detach().exp();
    cut = torch::zeros_like(probs, torch::kBool);
    if (top_k) {
      auto kth = std::get<0>(probs.topk(sp.top_k, -1)).select(-1, sp.top_k - 1).unsqueeze(-1);
      cut = probs < kth;
      probs = probs.masked_fill(cut, 0.0);
      probs = probs / probs.sum(-1, true);
    }
    if (sp.top_p < 1.0) {
      auto [sorted, order] = probs.sort(-1, true);
      auto before = sorted.cumsum(-1) - sorted;  // mass of the tokens ranked above each one
      cut = cut | torch::zeros_like(cut).scatter(-1, order, before >= sp.top_p);
    }
  }
  logp = logp.masked_fill(cut, -std::numeric_limits<float>::infinity());
  return logp - torch::logsumexp(logp, -1, true);
}

double uniform01(at::Generator& g) {
  auto* impl = at::check_generator<at::CPUGeneratorImpl>(g);
  std::lock_guard<std::mutex> lock(impl->mutex_);
  at::uniform_real_distribution<double> uniform(0.0, 1.0);
  return uniform(impl);
}

torch::Tensor sample_rows(const torch::Tensor& logits, const torch::Tensor& u, const SamplingParams& sp) {
  auto logp = sampling_log_softmax(logits, sp);
  torch::Tensor next;
  if (sp.temperature <= 0) {
    next = logp.argmax(-1);
  } else {
    // Inverse CDF: the first token whose cumulative mass exceeds u * total (cut tokens never).
    auto cdf = logp.exp().to(torch::kDouble).cumsum(-1);
    auto target = (u * cdf.select(-1, cdf.size(-1) - 1)).unsqueeze(-1);
    next = torch::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true).squeeze(-1).clamp_max(logp.size(-1) - 1);
  }
  auto lp = logp.gather(-1, next.unsqueeze(-1)).squeeze(-1);
  return torch::stack({next.to(torch::kDouble), lp.to(torch::kDouble)});
}

}  // namespace leap::lm
