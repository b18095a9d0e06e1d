#include "serve/connection_guard.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <vector>

#include "common/clock.h"

namespace leap::serve {
namespace {

// The port of a socket's local address, and its peer as "address:port"; false when it is not a
// connected IP socket.
bool endpoints(int fd, int* local_port, std::string* peer) {
  sockaddr_storage a{}, b{};
  socklen_t la = sizeof a, lb = sizeof b;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &la) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&b), &lb) != 0)
    return false;
  char host[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET && b.ss_family == AF_INET) {
    *local_port = ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
    auto* p = reinterpret_cast<sockaddr_in*>(&b);
    ::inet_ntop(AF_INET, &p->sin_addr, host, sizeof host);
    *peer = std::string(host) + ":" + std::to_string(ntohs(p->sin_port));
    return true;
  }
  if (a.ss_family == AF_INET6 && b.ss_family == AF_INET6) {
    *local_port = ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
    auto* p = reinterpret_cast<sockaddr_in6*>(&b);
    ::inet_ntop(AF_INET6, &p->sin6_addr, host, sizeof host);
    *peer = std::string(host) + ":" + std::to_string(ntohs(p->sin6_port));
    return true;
  }
  return false;
}

std::string key(const std::string& addr, int port) { return addr + ":" + std::to_string(port); }

}  // namespace

ConnectionGuard::ConnectionGuard(double deadline_s) : deadline_s_(deadline_s), thread_([this] { run(); }) {}

ConnectionGuard::~ConnectionGuard() {
  {
    std::lock_guard<std::mutex> l(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ConnectionGuard::watch_port(int port) { port_ = port; }

void ConnectionGuard::busy(const std::string& addr, int port) {
  std::lock_guard<std::mutex> l(m_);
  auto& c = conns_[key(addr, port)];
  if (c.since == 0) c.since = monotonic_seconds();
  c.busy = true;
}

void ConnectionGuard::idle(const std::string& addr, int port) {
  std::lock_guard<std::mutex> l(m_);
  auto& c = conns_[key(addr, port)];
  c.busy = false;
  c.since = monotonic_seconds();
}

void ConnectionGuard::run() {
  std::unique_lock<std::mutex> l(m_);
  while (!stop_) {
    cv_.wait_for(l, std::chrono::milliseconds(250), [this] { return stop_; });
    if (stop_ || port_ == 0) continue;
    l.unlock();
    const double now = monotonic_seconds();
    scan(now);
    l.lock();
  }
}

void ConnectionGuard::scan(double now) {
  // The process's sockets connected on the server's port (accepted connections).
  std::vector<std::pair<int, std::string>> live;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (auto* e = ::readdir(d)) {
      const int fd = std::atoi(e->d_name);
      if (fd <= 2) continue;
      int local = 0;
      std::string peer;
      if (endpoints(fd, &local, &peer) && local == port_) live.emplace_back(fd, peer);
    }
    ::closedir(d);
  }
  std::vector<std::pair<int, std::string>> late;
  {
    std::lock_guard<std::mutex> l(m_);
    for (auto& [k, c] : conns_) c.seen = false;
    for (const auto& [fd, peer] : live) {
      auto& c = conns_[peer];
      // A descriptor first seen: its idle time counts from now, not from an earlier connection's
      // mark on the same address (a handler's mark of a connection the scan never saw stays 10 s).
      if (c.since == 0 || c.fd != fd) c.since = now;
      c.fd = fd;
      c.seen = true;
    }
    for (auto it = conns_.begin(); it != conns_.end();) {
      // A handler's mark for a connection not yet scanned stays a while; a closed one goes.
      if (!it->second.seen && (it->second.fd >= 0 || now - it->second.since > 10)) {
        it = conns_.erase(it);
        continue;
      }
      if (it->second.seen && !it->second.busy && now - it->second.since > deadline_s_)
        late.emplace_back(it->second.fd, it->first);
      ++it;
    }
  }
  for (const auto& [fd, peer] : late) {
    // Still the same connection (the descriptor may have been reused since the scan).
    int local = 0;
    std::string again;
    if (!endpoints(fd, &local, &again) || local != port_ || again != peer || ::shutdown(fd, SHUT_RDWR) != 0) continue;
    ++closed_;
    std::lock_guard<std::mutex> l(m_);
    conns_[peer].since = 1e300;  // shut down once; it goes when its descriptor is closed
  }
}

}  // namespace leap::serve
