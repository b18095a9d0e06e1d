// Connections of `leap serve` that hold a thread without sending a request: a client sending a
// byte every few seconds keeps cpp-httplib's per-read timeout from ever expiring. Every
// connection must deliver each request (head and body) within a deadline from its first byte or
// its previous response; past it the socket is shut down and its thread is free. Requests a
// handler is working on (a synchronous /v1/eval waits minutes) are not held to it.
#pragma once
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace leap::serve {

class ConnectionGuard {
 public:
  explicit ConnectionGuard(double deadline_s);
  ~ConnectionGuard();
  void watch_port(int port);  // the server's port, once bound: its connections are watched
  // A handler starts working on (busy) or has answered (idle) the request of this peer.
  void busy(const std::string& addr, int port);
  void idle(const std::string& addr, int port);
  long closed() const { return closed_; }  // connections shut down for being too slow

 private:
  struct Conn {
    int fd = -1;
    double since = 0;  // first seen, or its last answer
    bool busy = false;
    bool seen = false;
  };
  void run();
  void scan(double now);

  const double deadline_s_;
  std::atomic<int> port_{0};
  std::atomic<long> closed_{0};
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<std::string, Conn> conns_;  // by peer "address:port"
  std::thread thread_;
};

}  // namespace leap::serve
