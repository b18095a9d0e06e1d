// The HTTP/JSON front door of `leap serve` (cpp-httplib: a maintained Debian package, one
// header-and-library dependency, a thread-pool server with chunked responses; the service needs
// no more). Endpoints and fields: docs/serve.md.
#pragma once
#include <memory>
#include <string>

#include "common/config.h"
#include "serve/eval_service.h"

namespace httplib {
class Server;
}

namespace leap::serve {

class ConnectionGuard;

class HttpApi {
 public:
  // `token`: the bearer token every request but /health must carry ("" = none).
  HttpApi(EvalService& service, const ServeConfig& cfg, std::string token);
  ~HttpApi();
  // Binds (port 0: any free port) and returns the port; throws LeapError when it cannot (a port
  // another process listens on included: no SO_REUSEPORT).
  int bind(const std::string& address, int port);
  void serve();  // blocks until stop()
  void stop();

 private:
  void routes();
  EvalService& service_;
  ServeConfig cfg_;
  std::string token_;
  std::unique_ptr<ConnectionGuard> guard_;
  std::unique_ptr<httplib::Server> server_;
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback(const std::string& address);

}  // namespace leap::serve
