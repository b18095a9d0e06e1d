#include "policy/lm_snapshot.h"

#include <torch/serialize.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "lm/safetensors.h"
#include "lm/sft.h"

namespace leap {
namespace {

// MemAvailable of /proc/meminfo; 0 where it cannot be read (no snapshot then).
size_t available_host_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    size_t kb = 0;
    in >> kb;
    if (key == "MemAvailable:") return kb << 10;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

torch::Tensor host_copy(const torch::Tensor& t) {
  auto d = t.detach();
  if (!d.is_cuda()) return d.clone();
  return torch::empty(d.sizes(), d.options().device(torch::kCPU).pinned_memory(true)).copy_(d);
}

std::string key_of(const torch::Tensor& t) { return c10::guts::to_string(t.unsafeGetTensorImpl()); }

struct LmSnapshot : PolicySnapshot {
  std::string from_dir;
  std::map<std::string, torch::Tensor> model, masters;
  // The optimizer's parameters (host copies of the stepped tensors, in its order) and their state.
  torch::optim::AdamWOptions options;
  std::vector<torch::Tensor> params;
  std::vector<std::optional<torch::optim::AdamWParamState>> states;

  // save()'s files: the optimizer is rebuilt over the host copies (its file keys each state by
  // its parameter's position, as the live one's does).
  void write(const std::string& dir) const override {
    lm::save_model_tensors(model, from_dir, dir);
    torch::optim::AdamW copy(params, options);
    for (size_t i = 0; i < params.size(); ++i)
      if (states[i]) copy.state()[key_of(params[i])] = std::make_unique<torch::optim::AdamWParamState>(*states[i]);
    torch::save(copy, dir + "/optimizer.pt");
    if (!masters.empty()) {
      std::filesystem::create_directories(dir + "/master-fp32");
      lm::write_safetensors(dir + "/master-fp32/model.safetensors", masters);
    }
  }
};

}  // namespace

std::unique_ptr<PolicySnapshot> snapshot_lm(const std::map<std::string, torch::Tensor>& model,
                                            const std::map<std::string, torch::Tensor>& masters,
                                            const torch::optim::AdamW& optimizer, const std::string& from_dir) {
  if (optimizer.param_groups().size() != 1) throw LeapError("lm policy: a snapshot expects one optimizer parameter group");
  const auto& group = optimizer.param_groups().front();
  const auto& state = optimizer.state();
  size_t bytes = 0;
  for (const auto& [n, t] : model) bytes += t.nbytes();
  for (const auto& [n, t] : masters) bytes += t.nbytes();
  for (const auto& [k, s] : state) {
    const auto& a = static_cast<const torch::optim::AdamWParamState&>(*s);
    for (const auto* t : {&a.exp_avg(), &a.exp_avg_sq(), &a.max_exp_avg_sq()})
      if (t->defined()) bytes += t->nbytes();
  }
  if (bytes > available_host_bytes() / 2) return nullptr;

  torch::NoGradGuard no_grad;
  auto snap = std::make_unique<LmSnapshot>();
  snap->from_dir = from_dir;
  std::map<const void*, torch::Tensor> copied;  // a stepped tensor is a master or a model parameter: copied once
  for (const auto& [n, t] : model) copied[t.unsafeGetTensorImpl()] = snap->model[n] = host_copy(t);
  for (const auto& [n, t] : masters) copied[t.unsafeGetTensorImpl()] = snap->masters[n] = host_copy(t);
  snap->options = static_cast<const torch::optim::AdamWOptions&>(group.options());
  for (const auto& p : group.params()) {
    auto c = copied.find(p.unsafeGetTensorImpl());
    snap->params.push_back(c != copied.end() ? c->second : host_copy(p));
    auto s = state.find(key_of(p));
    if (s == state.end()) {
      snap->states.emplace_back();
      continue;
    }
    auto a = static_cast<const torch::optim::AdamWParamState&>(*s->second);
    a.exp_avg(host_copy(a.exp_avg()));
    a.exp_avg_sq(host_copy(a.exp_avg_sq()));
    if (a.max_exp_avg_sq().defined()) a.max_exp_avg_sq(host_copy(a.max_exp_avg_sq()));
    snap->states.push_back(a);
  }
  return snap;
}

}  // namespace leap
