// The Python runners' zygote as the judge sees it, and the sends with descriptors the judge makes
// to it and to runners.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/subprocess.h"

namespace leap {

// Sends `n` bytes of `data` and `fds` (at most runner::kMaxLoadFds) in one message: true when all of it went.
bool send_with_fds(int socket, const void* data, size_t n, const std::vector<int>& fds);

// The Python runners' zygote (pyrunner.py --zygote) as the judge sees it: asked to fork runners,
// it reports how each ended. Trusted (it never loads a candidate) but in its runners' sandbox.
class Zygote {
 public:
  Zygote(ChildProcess outer, int control, int err);
  ~Zygote();
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;
  // Asks for a runner named `token` on `fds` (channel, stderr [, GPU gate, GPU lock]); false once
  // the zygote is gone.
  bool fork(uint64_t token, const std::vector<int>& fds);
  // SIGKILL to the runner of `token` (one whose pid the judge never learnt).
  void kill(uint64_t token);
  // The runner's wait status once the zygote has reaped it (waiting until `deadline`); SIGKILL's
  // once the zygote is gone (its sandbox's end killed every runner in it).
  std::optional<int> status(uint64_t token, Clock::time_point deadline);
  void forget(uint64_t token) { ended_.erase(token); }  // its runner is no more the judge's concern
  bool gone() const { return gone_; }
  // gone(), after reading what the zygote has reported (its end among it).
  bool ended() {
    read_reports(Clock::now());
    return gone_;
  }
  std::string stderr_tail();

 private:
  void read_reports(Clock::time_point deadline);

  ChildProcess outer_;
  int control_ = -1, err_ = -1;
  bool gone_ = false;
  // The wait status of each runner the judge still holds (-1 until reported); a report for any
  // other is dropped.
  std::map<uint64_t, int> ended_;
  std::string stderr_;
};

}  // namespace leap
