#include "compile_farm/nvrtc_server.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "common/clock.h"

namespace leap {

struct NvrtcServers::Server {
  ChildProcess process;
  int to_child = -1, from_child = -1;
  std::string pending;  // bytes read past the last reply
  ~Server() {
    if (to_child >= 0) ::close(to_child);
    if (from_child >= 0) ::close(from_child);
  }
};

NvrtcServers::NvrtcServers(std::vector<std::string> argv) : argv_(std::move(argv)) {}
NvrtcServers::~NvrtcServers() = default;

std::unique_ptr<NvrtcServers::Server> NvrtcServers::take() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      auto s = std::move(idle_.back());
      idle_.pop_back();
      return s;
    }
  }
  auto s = std::make_unique<Server>();
  auto [in_rd, in_wr] = make_pipe();
  auto [out_rd, out_wr] = make_pipe();
  SpawnSpec spec;
  spec.argv = argv_;
  spec.fds = {{in_rd, 0}};
  spec.stdout_fd = out_wr;
  try {
    s->process = launcher_.spawn(spec);  // outlives the compile thread that asked for it
  } catch (...) {
    for (int fd : {in_rd, in_wr, out_rd, out_wr}) ::close(fd);
    throw;
  }
  ::close(in_rd);
  ::close(out_wr);
  s->to_child = in_wr;
  s->from_child = out_rd;
  return s;
}

CommandResult NvrtcServers::compile(const std::string& source, const std::string& cubin, double timeout_s) {
  CommandResult r;
  auto t0 = Clock::now();
  std::unique_ptr<Server> s;
  try {
    s = take();
  } catch (const std::exception& e) {
    r.output = std::string("cannot start leap-nvrtc: ") + e.what();
    return r;
  }
  std::string request = source + "\t" + cubin + "\n";
  // A dead server shows as EPIPE here (SIGPIPE is ignored for the write) or EOF below.
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old);
  bool sent = ::write(s->to_child, request.data(), request.size()) == static_cast<ssize_t>(request.size());
  ::sigaction(SIGPIPE, &old, nullptr);
  auto deadline = after_seconds(timeout_s);
  std::string& buf = s->pending;
  bool ok = sent;
  size_t header_end = std::string::npos, log_size = 0;
  while (ok) {
    header_end = buf.find('\n');
    if (header_end != std::string::npos) {
      log_size = std::strtoull(buf.c_str() + buf.find(' ') + 1, nullptr, 10);
      if (buf.size() >= header_end + 1 + log_size) break;
    }
    double left = millis_until(deadline);
    if (left <= 0) {
      r.timed_out = true;
      ok = false;
      break;
    }
    pollfd p{s->from_child, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min(left, 1000.0)) + 1);
    if (n < 0 && errno == EINTR) continue;
    char chunk[8192];
    ssize_t got = n > 0 ? ::read(s->from_child, chunk, sizeof chunk) : 0;
    if (n > 0 && got <= 0) ok = false;  // the server died
    if (got > 0) buf.append(chunk, static_cast<size_t>(got));
  }
  r.wall_us = micros_since(t0);
  if (!ok) {
    r.output = r.timed_out ? "NVRTC exceeded the compile timeout" : "leap-nvrtc ended unexpectedly";
    s->process.kill();
    return r;  // not returned to the pool
  }
  r.exit_code = std::atoi(buf.c_str());
  r.output = buf.substr(header_end + 1, log_size);
  buf.erase(0, header_end + 1 + log_size);
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(s));
  return r;
}

}  // namespace leap
