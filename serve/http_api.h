// The HTTP/JSON front door of `leap serve` (cpp-httplib: a maintained Debian package, one
// header-and-library dependency, a thread-pool server with chunked responses; the service needs
// no more). One handler per endpoint: leap's own (/v1/..., http_v1.cpp) and KernelGYM's shape
// (/evaluate, /status, /results: http_gym.cpp). Endpoints and fields: docs/serve.md.
#pragma once
#include <memory>
#include <string>

#include "common/config.h"
#include "serve/eval_service.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace leap {
class DcpRegister;
}  // namespace leap

namespace leap::serve {

class ConnectionGuard;

class HttpApi {
 public:
  // `token`: the bearer token every request but /health must carry ("" = none); `learner`: the
  // DCP settings of the group register.
  HttpApi(EvalService& service, const ServeConfig& cfg, std::string token, const LearnerConfig& learner);
  ~HttpApi();
  // Binds (port 0: any free port) and returns the port; throws LeapError when it cannot (a port
  // another process listens on included: no SO_REUSEPORT).
  int bind(const std::string& address, int port);
  void serve();  // blocks until stop()
  void stop();

 private:
  using Handler = void (HttpApi::*)(const httplib::Request&, httplib::Response&);
  void routes();
  void middleware();  // the token, deadlines of slow clients, errors as JSON
  // A handler whose request has a body: a BadRequest it throws becomes its 400.
  void with_body(Handler h, const httplib::Request& req, httplib::Response& res);

  // leap's API (http_v1.cpp)
  void v1_evaluate(const httplib::Request& req, httplib::Response& res);  // POST /v1/evaluate: 202 + id
  void v1_eval(const httplib::Request& req, httplib::Response& res);      // POST /v1/eval: waits for the outcome
  void v1_batch(const httplib::Request& req, httplib::Response& res);     // POST /v1/batch: NDJSON as they finish
  void v1_status(const httplib::Request& req, httplib::Response& res);    // GET /v1/status/{id}
  void v1_results(const httplib::Request& req, httplib::Response& res);   // GET /v1/results/{id}
  void v1_tasks(const httplib::Request& req, httplib::Response& res);     // GET /v1/tasks
  void v1_task(const httplib::Request& req, httplib::Response& res);      // GET /v1/tasks/{name}
  void health(const httplib::Request& req, httplib::Response& res);       // GET /health
  void metrics(const httplib::Request& req, httplib::Response& res);      // GET /metrics (Prometheus text)
  // The DCP group register (http_groups.cpp)
  void v1_group_turn1(const httplib::Request& req, httplib::Response& res);  // POST /v1/groups/{group}/turn1
  void v1_group(const httplib::Request& req, httplib::Response& res);        // GET /v1/groups/{group}
  // KernelGYM's shape (http_gym.cpp)
  void gym_evaluate(const httplib::Request& req, httplib::Response& res);  // POST /evaluate
  void gym_status(const httplib::Request& req, httplib::Response& res);    // GET /status/{task_id}
  void gym_results(const httplib::Request& req, httplib::Response& res);   // GET /results/{task_id}

  EvalService& service_;
  ServeConfig cfg_;
  std::string token_;
  std::unique_ptr<ConnectionGuard> guard_;
  std::unique_ptr<DcpRegister> dcp_;
  std::unique_ptr<httplib::Server> server_;
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback(const std::string& address);

}  // namespace leap::serve
