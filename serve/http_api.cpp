#include "serve/http_api.h"

#include <httplib.h>
#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"
#include "serve/connection_guard.h"
#include "learner/group_register.h"
#include "serve/http_json.h"

namespace leap::serve {
namespace {

// A thread for every connection up to `max` (then they wait in turn): a reading connection holds
// its thread, so a fixed small pool is starved by a few slow clients; threads waiting in poll
// cost little, and the ConnectionGuard ends the slow ones.
class ElasticPool : public httplib::TaskQueue {
 public:
  explicit ElasticPool(size_t max) : max_(max) {}
  ~ElasticPool() override { shutdown(); }
  void enqueue(std::function<void()> fn) override {
    std::lock_guard<std::mutex> l(m_);
    jobs_.push_back(std::move(fn));
    if (idle_ == 0 && threads_.size() < max_) threads_.emplace_back([this] { work(); });
    cv_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> l(m_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void work() {
    std::unique_lock<std::mutex> l(m_);
    for (;;) {
      ++idle_;
      cv_.wait(l, [this] { return stop_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping, nothing left
      auto fn = std::move(jobs_.front());
      jobs_.pop_front();
      l.unlock();
      fn();
      l.lock();
    }
  }
  const size_t max_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stop_ = false;
};

}  // namespace

bool is_loopback(const std::string& a) {
  return a == "localhost" || a == "::1" || a == "[::1]" || a.rfind("127.", 0) == 0;
}

HttpApi::HttpApi(EvalService& service, const ServeConfig& cfg, std::string token, const LearnerConfig& learner)
    : service_(service), cfg_(cfg), token_(std::move(token)),
      guard_(std::make_unique<ConnectionGuard>(cfg.read_deadline_s)), dcp_(std::make_unique<DcpRegister>(learner)),
      server_(std::make_unique<httplib::Server>()) {
  const int threads = cfg_.threads;
  server_->new_task_queue = [threads] { return new ElasticPool(static_cast<size_t>(threads)); };
  server_->set_payload_max_length(static_cast<size_t>(cfg_.max_body_mb * 1024 * 1024));
  server_->set_read_timeout(30, 0);
  server_->set_write_timeout(30, 0);
  // SO_REUSEADDR alone (cpp-httplib sets SO_REUSEPORT): a second server on a port in use fails
  // to bind instead of sharing its connections.
  server_->set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // Every request answered starts its connection's next deadline.
  server_->set_logger([this](const httplib::Request& req, const httplib::Response&) {
    guard_->idle(req.remote_addr, req.remote_port);
  });
  routes();
}

HttpApi::~HttpApi() = default;

int HttpApi::bind(const std::string& address, int port) {
  int bound = port == 0 ? server_->bind_to_any_port(address) : (server_->bind_to_port(address, port) ? port : -1);
  if (bound <= 0)
    throw LeapError("leap serve: cannot listen on " + address + ":" + std::to_string(port) +
                    (port != 0 ? " (in use, or not an address of this machine)" : ""));
  guard_->watch_port(bound);
  return bound;
}

void HttpApi::serve() { server_->listen_after_bind(); }
void HttpApi::stop() { server_->stop(); }

void HttpApi::routes() {
  middleware();
  auto& S = *server_;
  auto body = [this](Handler h) {
    return [this, h](const httplib::Request& req, httplib::Response& res) { with_body(h, req, res); };
  };
  auto plain = [this](Handler h) {
    return [this, h](const httplib::Request& req, httplib::Response& res) { (this->*h)(req, res); };
  };
  S.Post("/v1/evaluate", body(&HttpApi::v1_evaluate));
  S.Post("/v1/eval", body(&HttpApi::v1_eval));
  S.Post("/v1/batch", body(&HttpApi::v1_batch));
  S.Get(R"(/v1/status/([^/]+))", plain(&HttpApi::v1_status));
  S.Get(R"(/v1/results/([^/]+))", plain(&HttpApi::v1_results));
  S.Get("/v1/tasks", plain(&HttpApi::v1_tasks));
  S.Get(R"(/v1/tasks/([^/]+))", plain(&HttpApi::v1_task));
  S.Post(R"(/v1/groups/([^/]+)/turn1)", body(&HttpApi::v1_group_turn1));
  S.Get(R"(/v1/groups/([^/]+))", plain(&HttpApi::v1_group));
  S.Get("/health", plain(&HttpApi::health));
  S.Get("/metrics", plain(&HttpApi::metrics));
  S.Post("/evaluate", body(&HttpApi::gym_evaluate));
  S.Get(R"(/status/([^/]+))", plain(&HttpApi::gym_status));
  S.Get(R"(/results/([^/]+))", plain(&HttpApi::gym_results));
}

void HttpApi::with_body(Handler h, const httplib::Request& req, httplib::Response& res) {
  guard_->busy(req.remote_addr, req.remote_port);  // its body is read: the rest is the handler's time
  try {
    (this->*h)(req, res);
  } catch (const BadRequest& b) {
    send_error(res, 400, b.message, b.field);
  }
}

void HttpApi::middleware() {
  auto& S = *server_;
  S.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // A request without a body is complete here; one with a body is once its handler runs.
    if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding"))
      guard_->busy(req.remote_addr, req.remote_port);
    if (token_.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + token_) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, 401, "a bearer token is required (Authorization: Bearer <[serve] token>)");
    return httplib::Server::HandlerResponse::Handled;
  });
  S.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, 500, "leap serve: " + what);
  });
  S.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) send_error(res, 413, "the request body is larger than [serve] max_body_mb");
    else if (res.status == 404) send_error(res, 404, "no such endpoint: " + req.method + " " + req.path);
    else send_error(res, res.status, "HTTP " + std::to_string(res.status));
  });
}

}  // namespace leap::serve
