#include "policy/lm_snapshot.h"

#include <torch/serialize.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/error.h"
#include "lm/safetensors.h"
#include "lm/sft.h"

namespace leap {
namespace {

// What new host memory a snapshot may take: MemAvailable of /proc/meminfo less a reserve for the
// training that goes on beside it (a quarter of MemTotal, at least 2 GiB); 0 where it cannot be
// read (no snapshot then).
size_t snapshot_room() {
  std::ifstream in("/proc/meminfo");
  size_t total = 0, available = 0;
  for (std::string key; in >> key;) {
    size_t kb = 0;
    in >> kb;
    if (key == "MemTotal:") total = kb << 10;
    if (key == "MemAvailable:") available = kb << 10;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  const size_t reserve = std::max<size_t>(total / 4, size_t{2} << 30);
  return available > reserve ? available - reserve : 0;
}

// Each tensor's copy into the arena's next buffer, which is reused where it has the same dtype
// and shape (the copies come in the same order every time) and made otherwise. Without an arena
// it copies nothing and only counts what the copies would take.
struct Copier {
  std::vector<torch::Tensor>* arena = nullptr;
  bool pinned = false;
  size_t next = 0, bytes = 0;
  bool from_gpu = false;
  torch::Tensor copy(const torch::Tensor& t) {
    auto d = t.detach();
    bytes += d.nbytes();
    from_gpu = from_gpu || d.is_cuda();
    if (!arena) return d;
    if (next == arena->size()) arena->emplace_back();
    auto& buf = (*arena)[next++];
    if (!buf.defined() || buf.scalar_type() != d.scalar_type() || buf.sizes() != d.sizes())
      buf = torch::empty(d.sizes(), torch::TensorOptions().dtype(d.scalar_type()).pinned_memory(pinned));
    return buf.copy_(d);
  }
};

// The optimizer state's key of a parameter: its TensorImpl's address, as text before LibTorch 2.
using StateKey = std::decay_t<decltype(std::declval<torch::optim::AdamW&>().state())>::key_type;
template <typename Key = StateKey>
Key key_of(const torch::Tensor& t) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream key;  // as c10::guts::to_string wrote it
    key << t.unsafeGetTensorImpl();
    return key.str();
  } else
    return t.unsafeGetTensorImpl();
}

struct LmSnapshot : PolicySnapshot {
  SnapshotArena arena;  // the copies' buffers, the policy's again once this is written
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

// The snapshot's tensors through `copier`: the model, its masters, the optimizer's parameters (a
// stepped tensor that is a master or a model parameter is copied once) and their moments.
std::unique_ptr<LmSnapshot> take(const std::map<std::string, torch::Tensor>& model,
                                 const std::map<std::string, torch::Tensor>& masters,
                                 const torch::optim::AdamW& optimizer, Copier& copier) {
  const auto& group = optimizer.param_groups().front();
  const auto& state = optimizer.state();
  auto snap = std::make_unique<LmSnapshot>();
  std::map<const void*, torch::Tensor> copied;
  for (const auto& [n, t] : model) copied[t.unsafeGetTensorImpl()] = snap->model[n] = copier.copy(t);
  for (const auto& [n, t] : masters) copied[t.unsafeGetTensorImpl()] = snap->masters[n] = copier.copy(t);
  snap->options = static_cast<const torch::optim::AdamWOptions&>(group.options());
  for (const auto& p : group.params()) {
    auto c = copied.find(p.unsafeGetTensorImpl());
    snap->params.push_back(c != copied.end() ? c->second : copier.copy(p));
    auto s = state.find(key_of(p));
    if (s == state.end()) {
      snap->states.emplace_back();
      continue;
    }
    auto a = static_cast<const torch::optim::AdamWParamState&>(*s->second);
    a.exp_avg(copier.copy(a.exp_avg()));
    a.exp_avg_sq(copier.copy(a.exp_avg_sq()));
    if (a.max_exp_avg_sq().defined()) a.max_exp_avg_sq(copier.copy(a.max_exp_avg_sq()));
    snap->states.push_back(a);
  }
  return snap;
}

}  // namespace

std::unique_ptr<PolicySnapshot> snapshot_lm(const std::map<std::string, torch::Tensor>& model,
                                            const std::map<std::string, torch::Tensor>& masters,
                                            const torch::optim::AdamW& optimizer, const std::string& from_dir,
                                            SnapshotArena& arena) {
  if (optimizer.param_groups().size() != 1) throw LeapError("lm policy: a snapshot expects one optimizer parameter group");
  torch::NoGradGuard no_grad;
  Copier count;  // what the copies take, before any memory is committed to them
  take(model, masters, optimizer, count);
  size_t held = 0;
  if (arena && arena.use_count() == 1)
    for (const auto& t : *arena) held += t.defined() ? t.nbytes() : 0;
  // Pinned buffers come from LibTorch's host cache, which rounds each up to a power of two.
  const size_t needed = (count.bytes > held ? count.bytes - held : 0) * (count.from_gpu ? 2 : 1);
  if (needed > snapshot_room()) return nullptr;
  if (!arena || arena.use_count() > 1) arena = std::make_shared<std::vector<torch::Tensor>>();

  Copier copier{arena.get(), count.from_gpu};
  auto snap = take(model, masters, optimizer, copier);
  snap->arena = arena;
  snap->from_dir = from_dir;
  return snap;
}

}  // namespace leap
