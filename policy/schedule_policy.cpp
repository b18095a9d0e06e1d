#include "policy/schedule_policy.h"

#include <torch/nn.h>
#include <torch/optim/adam.h>
#include <torch/serialize.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>

#include "common/error.h"
#include "tasks/schedule.h"

namespace leap {
namespace {

// The previous attempt's outcome as the policy sees it: its status, with a correct but too slow
// kernel (a timeout whose check is too_slow) told apart from one that never finished.
const std::vector<std::string> kStatuses = {"ok",           "compile_error",  "runtime_error", "timeout",
                                            "wrong_answer", "cheat_detected", "infra_error",   "too_slow"};

std::string outcome_class(const PolicyContext& ctx) {
  if (ctx.prev_status == Status::timeout && ctx.prev_check == Check::too_slow) return "too_slow";
  return to_string(ctx.prev_status);
}
constexpr int kMaxTurnFeature = 8;

int knob_total() {
  int n = 0;
  for (const auto& k : schedule_knobs()) n += static_cast<int>(k.values.size());
  return n;
}

int feature_size() {
  return static_cast<int>(schedule_tasks().size()) + kMaxTurnFeature + knob_total() + static_cast<int>(kStatuses.size());
}

// One-hot features of a context (see the header for its layout).
void encode(const std::vector<int32_t>& ctx, float* f) {
  const int tasks = static_cast<int>(schedule_tasks().size());
  std::fill(f, f + feature_size(), 0.0f);
  f[ctx.at(0)] = 1;
  f[tasks + std::min(ctx.at(1), kMaxTurnFeature) - 1] = 1;
  int off = tasks + kMaxTurnFeature;
  const auto& knobs = schedule_knobs();
  for (size_t k = 0; k < knobs.size(); ++k) {
    if (ctx.at(2 + k) >= 0) f[off + ctx[2 + k]] = 1;
    off += static_cast<int>(knobs[k].values.size());
  }
  if (ctx.at(2 + knobs.size()) >= 0) f[off + ctx[2 + knobs.size()]] = 1;
}

struct NetImpl : torch::nn::Module {
  NetImpl(int in, int hidden, int out)
      : l1(register_module("l1", torch::nn::Linear(in, hidden))), l2(register_module("l2", torch::nn::Linear(hidden, out))) {}
  torch::Tensor forward(const torch::Tensor& x) { return l2(torch::tanh(l1(x))); }
  torch::nn::Linear l1, l2;
};
TORCH_MODULE(Net);

class SchedulePolicy : public Policy {
 public:
  SchedulePolicy(const PolicyConfig& cfg, uint64_t seed) : cfg_(cfg) {
    // The initial weights come from LibTorch's global generator: seed and draw under one lock,
    // or policies built at once by roles running as threads would interleave their draws.
    static std::mutex init_mu;
    std::lock_guard<std::mutex> lock(init_mu);
    torch::set_num_threads(1);  // deterministic and small: one thread is faster and repeatable
    torch::manual_seed(seed);
    net_ = Net(feature_size(), cfg.hidden, knob_total());
    opt_ = std::make_unique<torch::optim::Adam>(net_->parameters(), torch::optim::AdamOptions(cfg.lr));
  }

  std::string kind() const override { return "schedule"; }

  bool can_write(const Task& task, Backend backend) const override {
    return has_schedule(task.name) && task.supports(backend);
  }

  Generation generate(const Task& task, Backend backend, const PolicyContext& ctx, uint64_t seed) override {
    const auto& knobs = schedule_knobs();
    Generation g;
    g.context.push_back(schedule_task_index(task.name));
    g.context.push_back(ctx.turn);
    for (size_t k = 0; k < knobs.size(); ++k)
      g.context.push_back(ctx.prev_actions.size() == knobs.size() ? ctx.prev_actions[k] : -1);
    auto st = std::find(kStatuses.begin(), kStatuses.end(), outcome_class(ctx));
    g.context.push_back(st == kStatuses.end() ? -1 : static_cast<int32_t>(st - kStatuses.begin()));

    std::vector<float> f(feature_size());
    encode(g.context, f.data());
    torch::NoGradGuard no_grad;
    auto logits = net_->forward(torch::from_blob(f.data(), {1, feature_size()}).clone())[0];
    std::mt19937_64 rng(seed);
    int off = 0;
    for (const auto& k : knobs) {
      const int n = static_cast<int>(k.values.size());
      auto logp = torch::log_softmax(logits.slice(0, off, off + n), 0);
      std::vector<double> p(n);
      for (int i = 0; i < n; ++i) p[i] = std::exp(logp[i].item<double>());
      int pick = ctx.greedy ? static_cast<int>(std::max_element(p.begin(), p.end()) - p.begin())
                            : std::discrete_distribution<int>(p.begin(), p.end())(rng);
      g.actions.push_back(pick);
      g.logprob += logp[pick].item<double>();
      off += n;
    }
    g.source = render_schedule(task, backend, g.actions);
    g.summary = describe(g.actions);
    g.decision = g.summary;  // the knob choices
    return g;
  }

  TrainStats train(const std::vector<TrainSample>& batch) override {
    TrainStats s;
    s.samples = s.trained = batch.size();
    if (batch.empty()) return s;
    // Its ratio is against the recorded behaviour log-probability: a stale sample's correction.
    for (const auto& b : batch) s.stale += b.staleness > 0;
    const int64_t n = static_cast<int64_t>(batch.size());
    const auto& knobs = schedule_knobs();
    std::vector<float> f(n * feature_size());
    std::vector<int64_t> actions;
    std::vector<double> old_logp, adv;
    for (int64_t i = 0; i < n; ++i) {
      encode(batch[i].context, f.data() + i * feature_size());
      if (batch[i].actions.size() != knobs.size()) throw LeapError("schedule policy: a sample has the wrong action count");
      for (auto a : batch[i].actions) actions.push_back(a);
      old_logp.push_back(batch[i].logprob);
      adv.push_back(batch[i].advantage);
    }
    auto x = torch::from_blob(f.data(), {n, feature_size()}).clone();
    auto a = torch::from_blob(actions.data(), {n, static_cast<int64_t>(knobs.size())}, torch::kLong).clone();
    auto old = torch::from_blob(old_logp.data(), {n}, torch::kDouble).to(torch::kFloat);
    auto A = torch::from_blob(adv.data(), {n}, torch::kDouble).to(torch::kFloat);
    for (int e = 0; e < cfg_.epochs; ++e) {
      auto logits = net_->forward(x);
      torch::Tensor logp = torch::zeros({n}), entropy = torch::zeros({n});
      int off = 0;
      for (size_t k = 0; k < knobs.size(); ++k) {
        const int m = static_cast<int>(knobs[k].values.size());
        auto lp = torch::log_softmax(logits.slice(1, off, off + m), 1);
        logp = logp + lp.gather(1, a.select(1, k).unsqueeze(1)).squeeze(1);
        entropy = entropy - (lp.exp() * lp).sum(1);
        off += m;
      }
      auto ratio = torch::exp(logp - old);
      auto surrogate = torch::min(ratio * A, torch::clamp(ratio, 1 - cfg_.clip, 1 + cfg_.clip) * A);
      auto loss = -surrogate.mean() - cfg_.entropy_coef * entropy.mean();
      opt_->zero_grad();
      loss.backward();
      opt_->step();
      s.loss = loss.item<double>();
      s.entropy = entropy.mean().item<double>();
    }
    return s;
  }

  std::vector<float> weights() const override {
    std::vector<float> w;
    for (const auto& p : net_->parameters()) {
      auto c = p.detach().contiguous();
      w.insert(w.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
    return w;
  }

  void set_weights(const std::vector<float>& w) override {
    torch::NoGradGuard no_grad;
    size_t at = 0;
    for (auto& p : net_->parameters()) {
      if (at + p.numel() > w.size()) throw LeapError("schedule policy: weight buffer too short");
      p.copy_(torch::from_blob(const_cast<float*>(w.data() + at), p.sizes()));
      at += p.numel();
    }
    if (at != w.size()) throw LeapError("schedule policy: weight buffer has the wrong size");
  }

  void save(const std::string& dir) const override {
    std::filesystem::create_directories(dir);
    torch::save(net_, dir + "/policy.pt");
    torch::save(*opt_, dir + "/optimizer.pt");
  }

  // Both files serialised now (a few kB), written later.
  std::unique_ptr<PolicySnapshot> snapshot() const override {
    struct Files : PolicySnapshot {
      std::ostringstream policy, optimizer;
      void write(const std::string& dir) const override {
        std::filesystem::create_directories(dir);
        for (const auto& [name, bytes] : {std::pair{"/policy.pt", &policy}, std::pair{"/optimizer.pt", &optimizer}}) {
          std::ofstream out(dir + name, std::ios::binary);
          out << bytes->str();
          if (!out.flush()) throw LeapError(dir + name + ": cannot write");
        }
      }
    };
    auto f = std::make_unique<Files>();
    torch::save(net_, f->policy);
    torch::save(*opt_, f->optimizer);
    return f;
  }

  void load(const std::string& dir) override {
    if (!std::filesystem::exists(dir + "/policy.pt") || !std::filesystem::exists(dir + "/optimizer.pt"))
      throw LeapError(dir + ": checkpoint lacks policy.pt or optimizer.pt");
    torch::load(net_, dir + "/policy.pt");
    torch::load(*opt_, dir + "/optimizer.pt");
  }

 private:
  PolicyConfig cfg_;
  Net net_{nullptr};
  std::unique_ptr<torch::optim::Adam> opt_;
};

}  // namespace

std::unique_ptr<Policy> make_schedule_policy(const PolicyConfig& cfg, uint64_t seed) {
  return std::make_unique<SchedulePolicy>(cfg, seed);
}

}  // namespace leap
