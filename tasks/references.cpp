#include "tasks/references.h"

#include <cmath>
#include <stdexcept>

namespace leap {
namespace {

using In = std::vector<at::Tensor>;
using Out = std::vector<at::Tensor>;

double param(const Params& p, const std::string& name) {
  for (const auto& [k, v] : p)
    if (k == name) return v;
  throw std::invalid_argument("reference needs parameter '" + name + "'");
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * w;
}

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  return at::layer_norm(x, {x.size(-1)}, w, b, eps);
}

// Training-mode batch norm: the batch's own mean and biased variance per feature (column).
at::Tensor batch_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  return at::batch_norm(x, w, b, {}, {}, /*training=*/true, /*momentum=*/0.1, eps, /*cudnn_enabled=*/false);
}

at::Tensor swish(const at::Tensor& x) { return x * at::sigmoid(x); }

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  auto scores = at::matmul(q, k.t()) * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  if (causal) {
    auto mask = at::ones({q.size(0), k.size(0)}, q.options().dtype(at::kBool)).triu(1);
    scores = scores.masked_fill(mask, -INFINITY);
  }
  return at::matmul(at::softmax(scores, -1), v);
}

struct Entry {
  const char* id;
  ReferenceFn fn;
};

const Entry kReferences[] = {
    {"relu", [](const In& x, const Params&) -> Out { return {at::relu(x[0])}; }},
    {"gelu", [](const In& x, const Params&) -> Out { return {at::gelu(x[0])}; }},
    {"sigmoid", [](const In& x, const Params&) -> Out { return {at::sigmoid(x[0])}; }},
    {"silu", [](const In& x, const Params&) -> Out { return {swish(x[0])}; }},
    {"leaky_relu",
     [](const In& x, const Params& p) -> Out { return {at::leaky_relu(x[0], param(p, "negative_slope"))}; }},
    {"sum_rows", [](const In& x, const Params&) -> Out { return {x[0].sum(-1)}; }},
    {"mean_rows", [](const In& x, const Params&) -> Out { return {x[0].mean(-1)}; }},
    {"max_rows", [](const In& x, const Params&) -> Out { return {std::get<0>(x[0].max(-1))}; }},
    {"softmax", [](const In& x, const Params&) -> Out { return {at::softmax(x[0], -1)}; }},
    {"log_softmax", [](const In& x, const Params&) -> Out { return {at::log_softmax(x[0], -1)}; }},
    {"softmax_dim0", [](const In& x, const Params&) -> Out { return {at::softmax(x[0], 0)}; }},
    {"scale_softmax_dim0",
     [](const In& x, const Params& p) -> Out { return {at::softmax(x[0] * param(p, "scale"), 0)}; }},
    {"log_softmax_dim0", [](const In& x, const Params&) -> Out { return {at::log_softmax(x[0], 0)}; }},
    {"batch_norm", [](const In& x, const Params& p) -> Out { return {batch_norm(x[0], x[1], x[2], param(p, "eps"))}; }},
    {"batch_norm_relu",
     [](const In& x, const Params& p) -> Out { return {at::relu(batch_norm(x[0], x[1], x[2], param(p, "eps")))}; }},
    {"batch_norm_silu",
     [](const In& x, const Params& p) -> Out { return {swish(batch_norm(x[0], x[1], x[2], param(p, "eps")))}; }},
    {"layer_norm", [](const In& x, const Params& p) -> Out { return {layer_norm(x[0], x[1], x[2], param(p, "eps"))}; }},
    {"rms_norm", [](const In& x, const Params& p) -> Out { return {rms_norm(x[0], x[1], param(p, "eps"))}; }},
    {"matmul", [](const In& x, const Params&) -> Out { return {at::matmul(x[0], x[1])}; }},
    {"matmul_transposed_b", [](const In& x, const Params&) -> Out { return {at::matmul(x[0], x[1].t())}; }},
    {"batched_matmul", [](const In& x, const Params&) -> Out { return {at::bmm(x[0], x[1])}; }},
    {"transpose", [](const In& x, const Params&) -> Out { return {x[0].t().contiguous()}; }},
    {"gemm_bias_relu", [](const In& x, const Params&) -> Out { return {at::relu(at::addmm(x[2], x[0], x[1].t()))}; }},
    {"gemm_bias_gelu", [](const In& x, const Params&) -> Out { return {at::gelu(at::addmm(x[2], x[0], x[1].t()))}; }},
    {"scale_softmax",
     [](const In& x, const Params& p) -> Out { return {at::softmax(x[0] * param(p, "scale"), -1)}; }},
    {"layer_norm_gelu",
     [](const In& x, const Params& p) -> Out { return {at::gelu(layer_norm(x[0], x[1], x[2], param(p, "eps")))}; }},
    {"rms_norm_silu", [](const In& x, const Params& p) -> Out { return {swish(rms_norm(x[0], x[1], param(p, "eps")))}; }},
    {"residual_add_layer_norm",
     [](const In& x, const Params& p) -> Out { return {layer_norm(x[0] + x[1], x[2], x[3], param(p, "eps"))}; }},
    {"residual_add_rms_norm",
     [](const In& x, const Params& p) -> Out { return {rms_norm(x[0] + x[1], x[2], param(p, "eps"))}; }},
    {"mlp_block",
     [](const In& x, const Params&) -> Out {
       auto h = at::gelu(at::addmm(x[2], x[0], x[1].t()));
       return {at::addmm(x[4], h, x[3].t())};
     }},
    {"attention_head", [](const In& x, const Params&) -> Out { return {attention(x[0], x[1], x[2], false)}; }},
    {"causal_attention_head", [](const In& x, const Params&) -> Out { return {attention(x[0], x[1], x[2], true)}; }},
};

}  // namespace

ReferenceFn find_reference(const std::string& id) {
  for (const auto& e : kReferences)
    if (id == e.id) return e.fn;
  return nullptr;
}

std::vector<std::string> reference_ids() {
  std::vector<std::string> ids;
  for (const auto& e : kReferences) ids.emplace_back(e.id);
  return ids;
}

}  // namespace leap
