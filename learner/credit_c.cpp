// libleap_credit: the learner's per-turn advantages behind a C ABI, so a trainer's Python (verl's
// advantage estimator, leap_client/credit.py) runs the same code as `leap run`'s learner.
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/error.h"
#include "learner/settings.h"

namespace {

void put_error(const std::string& msg, char* err, size_t err_len) {
  if (!err || err_len == 0) return;
  const size_t n = std::min(msg.size(), err_len - 1);
  std::memcpy(err, msg.data(), n);
  err[n] = '\0';
}

}  // namespace

extern "C" {

// The advantages of a step's groups. `learner_toml`: a leap configuration's text (its [learner]
// table sets the reward; "" = leap's defaults; the group size is each group's own). Rollout r
// (over all groups in order) took turns[r] turns; `correct`, `speedup` and `infra` hold those
// turns in the same order, and `out` receives one advantage per turn. Returns 0, or -1 with the
// reason in `err`.
int leap_step_advantages(const char* learner_toml, int n_groups, const int* group_sizes, const int* turns,
                         const unsigned char* correct, const double* speedup, const unsigned char* infra, double* out,
                         char* err, size_t err_len) {
  try {
    leap::LearnerConfig l = leap::parse_config(learner_toml ? learner_toml : "", "the [learner] settings").learner;
    std::vector<std::vector<leap::Trajectory>> step(static_cast<size_t>(std::max(n_groups, 0)));
    size_t r = 0, k = 0;
    for (size_t gi = 0; gi < step.size(); ++gi) {
      auto& g = step[gi];
      const int size = group_sizes[gi];
      if (size < 2) throw leap::LeapError("a group needs at least 2 rollouts, got " + std::to_string(size));
      for (int i = 0; i < size; ++i, ++r) {
        if (turns[r] < 1 || turns[r] > l.max_turns)
          throw leap::LeapError("a rollout took " + std::to_string(turns[r]) + " turns; [learner] max_turns is " +
                                std::to_string(l.max_turns));
        auto& traj = g.emplace_back();
        for (int t = 0; t < turns[r]; ++t, ++k) traj.push_back({correct[k] != 0, speedup[k], infra[k] != 0});
      }
    }
    const auto adv = leap::step_advantages(step, leap::reward_config(l)).advantages;
    k = 0;
    for (const auto& g : adv)
      for (const auto& rollout : g)
        for (double a : rollout) out[k++] = a;
    return 0;
  } catch (const std::exception& e) {
    put_error(e.what(), err, err_len);
    return -1;
  }
}

}  // extern "C"
