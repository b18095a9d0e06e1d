#include "judge/pool/zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "judge/runner/protocol.h"

namespace leap {
namespace {

constexpr size_t kZygoteStderrCap = 4096;  // the end of the zygote's stderr kept for messages

}  // namespace

bool send_with_fds(int socket, const void* data, size_t n, const std::vector<int>& fds) {
  if (fds.size() > static_cast<size_t>(runner::kMaxLoadFds)) throw LeapError("too many descriptors for a runner");
  iovec io{const_cast<void*>(data), n};
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctrl[CMSG_SPACE(runner::kMaxLoadFds * sizeof(int))];
  if (!fds.empty()) {
    m.msg_control = ctrl;
    m.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
    cmsghdr* h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(h), fds.data(), fds.size() * sizeof(int));
  }
  return ::sendmsg(socket, &m, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

Zygote::Zygote(ChildProcess outer, int control, int err) : outer_(std::move(outer)), control_(control), err_(err) {}

Zygote::~Zygote() {
  outer_.kill();  // the sandbox ends with it, and every runner still in it
  close_fd(control_);
  close_fd(err_);
}

bool Zygote::fork(uint64_t token, const std::vector<int>& fds) {
  read_reports(Clock::now());  // what it reported so far (its socket's buffer is not the place)
  if (gone_) return false;
  runner::ZygoteRequest q;
  q.op = runner::ZygoteOp::fork;
  q.token = token;
  if (send_with_fds(control_, &q, sizeof q, fds)) {
    ended_[token] = -1;
    return true;
  }
  gone_ = true;
  return false;
}

void Zygote::kill(uint64_t token) {
  if (gone_) return;
  runner::ZygoteRequest q;
  q.op = runner::ZygoteOp::kill;
  q.token = token;
  if (!send_with_fds(control_, &q, sizeof q, {})) gone_ = true;
}

std::optional<int> Zygote::status(uint64_t token, Clock::time_point deadline) {
  for (;;) {
    if (auto it = ended_.find(token); it != ended_.end() && it->second != -1) return it->second;
    if (gone_) return SIGKILL;  // the wait status of a process SIGKILL ended
    if (millis_until(deadline) <= 0) {
      read_reports(deadline);
      auto it = ended_.find(token);
      if (it != ended_.end() && it->second != -1) return it->second;
      return gone_ ? std::optional<int>(SIGKILL) : std::nullopt;
    }
    read_reports(deadline);
  }
}

void Zygote::read_reports(Clock::time_point deadline) {
  for (bool first = true;; first = false) {
    const double left = millis_until(deadline);
    pollfd p[2] = {{control_, POLLIN, 0}, {err_, POLLIN, 0}};
    // Everything already there, then (when asked to wait) one wake-up's worth.
    int n = ::poll(p, 2, first && left > 0 ? static_cast<int>(std::min(left, 1000.0)) + 1 : 0);
    if (n <= 0) return;
    if (p[1].revents && !read_tail(err_, stderr_, kZygoteStderrCap)) close_fd(err_);
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    runner::ZygoteReport r;
    ssize_t got = ::recv(control_, &r, sizeof r, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (got != static_cast<ssize_t>(sizeof r) || r.magic != runner::kZygoteMagic) {
      gone_ = true;  // closed, or not the zygote's own words: it is not asked again
      return;
    }
    if (r.event == runner::ZygoteEvent::ended)
      if (auto it = ended_.find(r.token); it != ended_.end()) it->second = r.status;
  }
}

std::string Zygote::stderr_tail() {
  if (err_ >= 0 && !read_tail(err_, stderr_, kZygoteStderrCap)) close_fd(err_);
  return stderr_;
}

}  // namespace leap
