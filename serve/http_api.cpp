#include "serve/http_api.h"

#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "serve/connection_guard.h"

namespace leap::serve {
namespace {

using json = nlohmann::json;

// A request the client must fix: HTTP 400 naming the field.
struct BadRequest {
  std::string field, message;
};

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& field = "") {
  json j{{"error", message}};
  if (!field.empty()) j["field"] = field;
  send_json(res, status, j);
}

std::string iso_time(double unix_s) {
  if (unix_s <= 0) return "";
  std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(std::fmod(unix_s, 1.0) * 1000));
  return out;
}

json parse_body(const httplib::Request& req) {
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) throw BadRequest{"", "the body is not valid JSON (UTF-8)"};
  if (!j.is_object()) throw BadRequest{"", "the body must be a JSON object"};
  return j;
}

std::string str_field(const json& j, const std::string& field, const std::string& path, bool required) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) {
    if (required) throw BadRequest{path, "'" + path + "' is required"};
    return "";
  }
  if (!it->is_string()) throw BadRequest{path, "'" + path + "' must be a string"};
  return it->get<std::string>();
}

// An optional integer field within lo..hi; anything else a 400 naming `path`.
std::optional<uint64_t> count_field(const json& j, const std::string& field, const std::string& path, uint64_t lo,
                                    uint64_t hi) {
  auto it = j.find(field);
  if (it == j.end()) return std::nullopt;
  if (!it->is_number_integer() || it->get<int64_t>() < static_cast<int64_t>(lo) || it->get<uint64_t>() > hi)
    throw BadRequest{path, "'" + path + "' must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi)};
  return it->get<uint64_t>();
}

void only_fields(const json& j, const std::set<std::string>& allowed, const std::string& prefix) {
  for (const auto& [k, v] : j.items())
    if (!allowed.count(k)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw BadRequest{prefix + k, "unknown field '" + prefix + k + "' (known: " + list + ")"};
    }
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 200 || s[0] == '.') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

// Lines of a source, trailing blanks dropped: a reference the client sends matches a task's
// PyTorch source whatever its line endings and trailing whitespace.
std::string normalized(const std::string& code) {
  std::istringstream in(code);
  std::string out, line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    lines.push_back(line);
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  size_t first = 0;
  while (first < lines.size() && lines[first].empty()) ++first;
  for (size_t i = first; i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

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

HttpApi::HttpApi(EvalService& service, const ServeConfig& cfg, std::string token)
    : service_(service), cfg_(cfg), token_(std::move(token)),
      guard_(std::make_unique<ConnectionGuard>(cfg.read_deadline_s)), server_(std::make_unique<httplib::Server>()) {
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
  auto& svc = service_;
  const ServeConfig cfg = cfg_;
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

  // Settings a request may choose, within the server's limits; the key is what it chose.
  auto settings_of = [cfg](const json& j, const std::string& path, EvalConfig base, std::string* key) {
    if (!j.is_object()) throw BadRequest{path, "'" + path + "' must be an object"};
    only_fields(j, {"trials", "timing_budget_ms", "min_samples", "seed"}, path + ".");
    auto count = [&](const char* f, uint64_t lo, uint64_t hi) { return count_field(j, f, path + "." + f, lo, hi); };
    if (auto v = count("trials", 1, cfg.max_trials)) base.trials = static_cast<uint32_t>(*v);
    if (auto v = count("min_samples", 1, 1000)) base.min_samples = static_cast<uint32_t>(*v);
    if (auto v = count("seed", 0, UINT64_MAX)) base.seed = *v;
    if (auto it = j.find("timing_budget_ms"); it != j.end()) {
      if (!it->is_number() || !(it->get<double>() > 0) || it->get<double>() > cfg.max_timing_budget_ms)
        throw BadRequest{path + ".timing_budget_ms", "'" + path + ".timing_budget_ms' must be a number in (0, " +
                                                         std::to_string(cfg.max_timing_budget_ms) + "]"};
      base.timing_budget_ms = it->get<double>();
    }
    *key = j.dump();
    return base;
  };
  // One candidate of /v1/evaluate, /v1/eval or /v1/batch.
  auto submission_of = [&svc, settings_of](const json& j, const std::string& prefix, const EvalConfig& base,
                                           const json* shared_settings) {
    Submission s;
    s.task = str_field(j, "task", prefix + "task", true);
    const Task* t = svc.task(s.task);
    if (!t) throw BadRequest{prefix + "task", "unknown task '" + s.task + "' (GET /v1/tasks lists them)"};
    if (!t->supports(svc.backend()))
      throw BadRequest{prefix + "task", "task '" + s.task + "' has no sizes for the " + to_string(svc.backend()) + " backend"};
    s.source = str_field(j, "source", prefix + "source", true);
    if (s.source.find_first_not_of(" \t\r\n") == std::string::npos)
      throw BadRequest{prefix + "source", "'" + prefix + "source' is empty"};
    s.name = str_field(j, "name", prefix + "name", false);
    if (s.name.empty()) s.name = s.task + (svc.backend() == Backend::cuda ? ".cu" : ".cpp");
    if (!valid_name(s.name))
      throw BadRequest{prefix + "name", "'" + prefix + "name' must be 1-200 of [A-Za-z0-9._-], not starting with '.'"};
    std::string backend = str_field(j, "backend", prefix + "backend", false);
    if (!backend.empty() && backend != to_string(svc.backend()))
      throw BadRequest{prefix + "backend", "this server evaluates on the " + to_string(svc.backend()) + " backend, not '" +
                                               backend + "'"};
    s.settings = base;
    if (auto it = j.find("settings"); it != j.end()) s.settings = settings_of(*it, prefix + "settings", base, &s.settings_key);
    else if (shared_settings) s.settings = settings_of(*shared_settings, "settings", base, &s.settings_key);
    return s;
  };

  // The Idempotency-Key header: a client retrying after a broken connection gets the first id.
  auto with_key = [](Submission s, const httplib::Request& req) {
    s.idempotency_key = req.get_header_value("Idempotency-Key");
    if (req.has_header("Idempotency-Key") &&
        (s.idempotency_key.empty() || s.idempotency_key.size() > 200 ||
         std::any_of(s.idempotency_key.begin(), s.idempotency_key.end(), [](char c) { return c < 0x21 || c > 0x7e; })))
      throw BadRequest{"Idempotency-Key", "the Idempotency-Key header must be 1-200 printable ASCII characters"};
    return s;
  };
  auto record = [&svc](const JobView& v) {
    json j = to_json(v.outcome);
    j["id"] = v.id;
    j["state"] = to_string(v.state);
    j["cached"] = v.cached;
    j["feedback_text"] = feedback_text(v.outcome);
    j["device"] = svc.device_model();
    j["submitted_at"] = iso_time(v.submitted_s);
    j["finished_at"] = iso_time(v.finished_s);
    return j;
  };
  auto status_of = [](const JobView& v) {
    json j{{"id", v.id}, {"state", to_string(v.state)}};
    if (v.state == JobState::queued) j["queue_position"] = v.queue_position;
    if (v.state == JobState::done) j["status"] = to_string(v.outcome.status);
    return j;
  };
  auto refuse = [](httplib::Response& res, SubmitResult::Kind k) {
    if (k == SubmitResult::Kind::key_reused) {
      send_error(res, 422, "this Idempotency-Key was used for a different submission", "Idempotency-Key");
    } else if (k == SubmitResult::Kind::queue_full) {
      res.set_header("Retry-After", "1");
      send_error(res, 429, "the evaluation queue is full ([serve] queue_limit): retry after a second");
    } else {
      res.set_header("Retry-After", "5");
      send_error(res, 503, "leap serve is shutting down");
    }
  };
  // Runs `f`, turning a BadRequest into its 400.
  auto guarded = [this](auto f) {
    return [f, this](const httplib::Request& req, httplib::Response& res) {
      guard_->busy(req.remote_addr, req.remote_port);  // its body is read: the rest is the handler's time
      try {
        f(req, res);
      } catch (const BadRequest& b) {
        send_error(res, 400, b.message, b.field);
      }
    };
  };
  const std::set<std::string> v1_fields = {"task", "source", "name", "backend", "settings"};

  S.Post("/v1/evaluate", guarded([&svc, submission_of, with_key, refuse, v1_fields](const httplib::Request& req, httplib::Response& res) {
    json j = parse_body(req);
    only_fields(j, v1_fields, "");
    auto r = svc.submit(with_key(submission_of(j, "", svc.eval_defaults(), nullptr), req));
    if (r.kind != SubmitResult::Kind::accepted) return refuse(res, r.kind);
    auto v = svc.get(r.id);
    json out{{"id", r.id}, {"state", v ? to_string(v->state) : "queued"}};
    if (r.repeated) out["repeated"] = true;
    send_json(res, 202, out);
  }));
  S.Get(R"(/v1/status/([^/]+))", [&svc, status_of](const httplib::Request& req, httplib::Response& res) {
    auto v = svc.get(req.matches[1]);
    if (!v) return send_error(res, 404, "unknown evaluation id '" + std::string(req.matches[1]) + "'");
    send_json(res, 200, status_of(*v));
  });
  S.Get(R"(/v1/results/([^/]+))", [&svc, record, status_of](const httplib::Request& req, httplib::Response& res) {
    auto v = svc.get(req.matches[1]);
    if (!v) return send_error(res, 404, "unknown evaluation id '" + std::string(req.matches[1]) + "'");
    if (v->state != JobState::done) return send_json(res, 202, status_of(*v));
    send_json(res, 200, record(*v));
  });
  S.Post("/v1/eval", guarded([&svc, submission_of, with_key, refuse, record, status_of, v1_fields, cfg](
                                 const httplib::Request& req, httplib::Response& res) {
    json j = parse_body(req);
    auto fields = v1_fields;
    fields.insert("timeout_s");
    only_fields(j, fields, "");
    double timeout = std::min(cfg.max_wait_s, 300.0);
    if (auto it = j.find("timeout_s"); it != j.end()) {
      if (!it->is_number() || !(it->get<double>() > 0) || it->get<double>() > cfg.max_wait_s)
        throw BadRequest{"timeout_s", "'timeout_s' must be a number in (0, " + std::to_string(cfg.max_wait_s) + "]"};
      timeout = it->get<double>();
    }
    auto r = svc.submit(with_key(submission_of(j, "", svc.eval_defaults(), nullptr), req));
    if (r.kind != SubmitResult::Kind::accepted) return refuse(res, r.kind);
    auto v = svc.wait(r.id, timeout);
    if (!v || v->state != JobState::done) {
      json out = v ? status_of(*v) : json{{"id", r.id}};
      out["error"] = "not finished within " + std::to_string(timeout) + " s: GET /v1/results/" + r.id + " later";
      return send_json(res, 504, out);
    }
    send_json(res, 200, record(*v));
  }));
  S.Post("/v1/batch", guarded([&svc, submission_of, refuse, record](const httplib::Request& req, httplib::Response& res) {
    json j = parse_body(req);
    only_fields(j, {"candidates", "settings"}, "");
    auto cands = j.find("candidates");
    if (cands == j.end() || !cands->is_array() || cands->empty())
      throw BadRequest{"candidates", "'candidates' must be a non-empty array"};
    const json* shared = j.contains("settings") ? &j["settings"] : nullptr;
    std::vector<Submission> subs;
    for (size_t i = 0; i < cands->size(); ++i) {
      const std::string prefix = "candidates[" + std::to_string(i) + "].";
      if (!(*cands)[i].is_object()) throw BadRequest{prefix.substr(0, prefix.size() - 1), "each candidate must be an object"};
      only_fields((*cands)[i], {"task", "source", "name", "backend", "settings"}, prefix);
      subs.push_back(submission_of((*cands)[i], prefix, svc.eval_defaults(), shared));
    }
    if (subs.size() > svc.free_slots()) {
      res.set_header("Retry-After", "1");
      return send_error(res, 429, "the queue has room for " + std::to_string(svc.free_slots()) + " evaluations, not " +
                                      std::to_string(subs.size()) + ": retry later or send fewer");
    }
    auto ids = std::make_shared<std::vector<std::string>>();
    for (auto& s : subs) {
      auto r = svc.submit(std::move(s));
      if (r.kind != SubmitResult::Kind::accepted) {
        if (ids->empty()) return refuse(res, r.kind);
        ids->push_back("");  // reported as refused in its line
        continue;
      }
      ids->push_back(r.id);
    }
    auto pending = std::make_shared<std::vector<std::string>>();
    auto index = std::make_shared<std::map<std::string, size_t>>();
    auto refused = std::make_shared<std::vector<size_t>>();
    for (size_t i = 0; i < ids->size(); ++i) {
      if ((*ids)[i].empty()) refused->push_back(i);
      else {
        pending->push_back((*ids)[i]);
        (*index)[(*ids)[i]] = i;
      }
    }
    res.status = 200;
    res.set_chunked_content_provider(
        "application/x-ndjson", [&svc, record, pending, index, refused](size_t, httplib::DataSink& sink) {
          if (!refused->empty()) {
            for (size_t i : *refused) {
              std::string line = json{{"index", i}, {"state", "refused"}, {"error", "the queue filled"}}.dump() + "\n";
              sink.write(line.data(), line.size());
            }
            refused->clear();
            return true;
          }
          if (pending->empty()) {
            sink.done();
            return true;
          }
          auto v = svc.wait_any(*pending, 1.0);
          if (!v) return sink.is_writable();  // nothing finished this second; stop if the client left
          pending->erase(std::find(pending->begin(), pending->end(), v->id));
          json line = record(*v);
          line["index"] = index->at(v->id);
          std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
          return sink.write(text.data(), text.size());
        });
  }));

  // KernelGYM's shape: /evaluate -> /status/{task_id} -> /results/{task_id}, its field names.
  S.Post("/evaluate", guarded([&svc, refuse, cfg](const httplib::Request& req, httplib::Response& res) {
    json j = parse_body(req);
    for (auto it = j.begin(); it != j.end();)  // KernelGYM clients send null for what they leave unset
      it = it->is_null() ? j.erase(it) : std::next(it);
    std::string client_id = str_field(j, "task_id", "task_id", true);
    if (client_id.empty() || client_id.size() > 100) throw BadRequest{"task_id", "'task_id' must be 1-100 characters"};
    Submission s;
    s.settings = svc.eval_defaults();
    s.client_id = client_id;
    s.source = str_field(j, "kernel_code", "kernel_code", true);
    if (s.source.find_first_not_of(" \t\r\n") == std::string::npos) throw BadRequest{"kernel_code", "'kernel_code' is empty"};
    s.task = str_field(j, "task", "task", false);
    if (s.task.empty()) {
      std::string ref = normalized(str_field(j, "reference_code", "reference_code", false));
      if (ref.empty()) throw BadRequest{"reference_code", "name the task ('task') or send its 'reference_code'"};
      for (const auto& t : svc.tasks())
        if (!t.torch_code.empty() && normalized(t.torch_code) == ref) s.task = t.name;
      if (s.task.empty())
        throw BadRequest{"reference_code", "'reference_code' is not the PyTorch source of a served task; name the task "
                                           "with 'task' (GET /v1/tasks)"};
    }
    const Task* t = svc.task(s.task);
    if (!t || !t->supports(svc.backend())) throw BadRequest{"task", "unknown task '" + s.task + "' for this server"};
    s.name = s.task + (svc.backend() == Backend::cuda ? ".cu" : ".cpp");
    auto count = [&](const char* f, uint64_t lo, uint64_t hi) { return count_field(j, f, f, lo, hi); };
    json chosen = json::object();
    if (auto v = count("num_correct_trials", 1, cfg.max_trials)) s.settings.trials = static_cast<uint32_t>(*v), chosen["trials"] = *v;
    if (auto v = count("num_perf_trials", 1, 1000)) s.settings.min_samples = static_cast<uint32_t>(*v), chosen["min_samples"] = *v;
    if (auto v = count("num_warmup", 0, 100)) s.settings.warmup_calls = static_cast<uint32_t>(*v), chosen["warmup"] = *v;
    s.settings_key = chosen.dump();
    if (auto it = j.find("force_refresh"); it != j.end() && !it->is_boolean())
      throw BadRequest{"force_refresh", "'force_refresh' must be true or false"};
    if (j.value("force_refresh", false)) s.settings_key += " refresh@" + std::to_string(unix_seconds());
    auto r = svc.submit(std::move(s));
    if (r.kind != SubmitResult::Kind::accepted) return refuse(res, r.kind);
    send_json(res, 200, {{"task_id", client_id}, {"status", "pending"}});
  }));
  auto gym_status = [](const JobView& v) -> std::string {
    if (v.state == JobState::queued) return "pending";
    if (v.state == JobState::running) return "processing";
    return v.outcome.status == Status::infra_error ? "failed" : "completed";
  };
  S.Get(R"(/status/([^/]+))", [&svc, gym_status](const httplib::Request& req, httplib::Response& res) {
    const std::string client_id = req.matches[1];
    auto v = svc.get(svc.id_of_client(client_id));
    if (!v) return send_error(res, 404, "unknown task_id '" + client_id + "'");
    json j{{"task_id", client_id}, {"status", gym_status(*v)}};
    if (v->state == JobState::queued) j["queue_position"] = v->queue_position;
    send_json(res, 200, j);
  });
  S.Get(R"(/results/([^/]+))", [&svc, gym_status](const httplib::Request& req, httplib::Response& res) {
    const std::string client_id = req.matches[1];
    auto v = svc.get(svc.id_of_client(client_id));
    if (!v) return send_error(res, 404, "unknown task_id '" + client_id + "'");
    json j{{"task_id", client_id}, {"status", gym_status(*v)}};
    if (v->state != JobState::done) return send_json(res, 202, j);
    const auto& o = v->outcome;
    const bool ok = o.status == Status::ok;
    j["compiled"] = o.status != Status::compile_error;
    j["correctness"] = ok;
    j["reference_runtime"] = o.reference_timing.median_us / 1000;  // ms, as KernelBench reports
    j["kernel_runtime"] = ok ? json(o.candidate_timing.median_us / 1000) : json(nullptr);
    j["speedup"] = ok ? json(o.speedup) : json(nullptr);
    j["metadata"] = {{"gpu_name", svc.device_model()}, {"backend", to_string(o.backend)}, {"leap_status", to_string(o.status)},
                     {"check", o.check}, {"cached", v->cached}, {"id", v->id}, {"feedback_text", feedback_text(o)}};
    if (!ok) {
      j["error_message"] = o.feedback;
      static const std::map<Status, std::string> codes = {
          {Status::compile_error, "COMPILATION_ERROR"}, {Status::wrong_answer, "CORRECTNESS_ERROR"},
          {Status::runtime_error, "RUNTIME_ERROR"},     {Status::timeout, "TIMEOUT_ERROR"},
          {Status::cheat_detected, "VALIDATION_ERROR"}, {Status::infra_error, "SYSTEM_ERROR"}};
      j["error_code"] = codes.at(o.status);
    }
    j["submitted_at"] = iso_time(v->submitted_s);
    j["completed_at"] = iso_time(v->finished_s);
    j["processing_time"] = v->finished_s - v->submitted_s;
    send_json(res, 200, j);
  });

  S.Get("/v1/tasks", [&svc](const httplib::Request&, httplib::Response& res) {
    json list = json::array();
    for (const auto& t : svc.tasks()) {
      if (!t.supports(svc.backend())) continue;
      list.push_back({{"name", t.name}, {"level", t.level}, {"description", t.description}});
    }
    send_json(res, 200, {{"backend", to_string(svc.backend())}, {"tasks", list}});
  });
  S.Get(R"(/v1/tasks/([^/]+))", [&svc](const httplib::Request& req, httplib::Response& res) {
    const Task* t = svc.task(req.matches[1]);
    if (!t || !t->supports(svc.backend())) return send_error(res, 404, "unknown task '" + std::string(req.matches[1]) + "'");
    auto tensors = [&](const std::vector<TensorDecl>& ts) {
      json out = json::array();
      for (const auto& d : ts) {
        json e{{"name", d.name}, {"dtype", to_string(d.dtype)}, {"shape", t->shape(d, svc.backend())}};
        if (!d.parameter.empty()) e["parameter"] = d.parameter;
        out.push_back(e);
      }
      return out;
    };
    json params = json::object();
    for (const auto& [k, v] : t->params) params[k] = v;
    send_json(res, 200, {{"name", t->name}, {"level", t->level}, {"description", t->description},
                         {"torch_code", t->torch_code}, {"backend", to_string(svc.backend())},
                         {"inputs", tensors(t->inputs)}, {"outputs", tensors(t->outputs)}, {"params", params}});
  });
  S.Get("/health", [&svc](const httplib::Request&, httplib::Response& res) {
    auto m = svc.metrics();
    send_json(res, 200, {{"status", "ok"}, {"backend", to_string(svc.backend())}, {"device", svc.device_model()},
                         {"evaluators", m.evaluators}, {"queue_depth", m.queue_depth}, {"in_flight", m.in_flight},
                         {"workers_alive", m.workers_alive}, {"workers_lost", m.workers_lost}, {"requeued", m.requeued},
                         {"workers", svc.workers_json()},
                         {"uptime_s", m.uptime_s}});
  });
  S.Get("/metrics", [&svc](const httplib::Request&, httplib::Response& res) {
    auto m = svc.metrics();
    std::ostringstream o;
    auto gauge = [&](const char* name, const char* help, double v) {
      o << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n" << name << " " << v << "\n";
    };
    auto counter = [&](const char* name, const char* help, double v) {
      o << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n" << name << " " << v << "\n";
    };
    gauge("leap_serve_queue_depth", "Evaluations waiting for a judge.", static_cast<double>(m.queue_depth));
    gauge("leap_serve_in_flight", "Evaluations being judged.", static_cast<double>(m.in_flight));
    gauge("leap_serve_evaluators", "Judges serving the queue.", static_cast<double>(m.evaluators));
    gauge("leap_serve_workers_alive", "Worker ranks answering (mpirun).", static_cast<double>(m.workers_alive));
    counter("leap_serve_workers_lost_total", "Worker ranks lost (silent past worker_timeout_s).",
            static_cast<double>(m.workers_lost));
    counter("leap_serve_requeued_total", "Evaluations re-sent after their worker was lost.", static_cast<double>(m.requeued));
    gauge("leap_serve_evaluations_per_second", "Evaluations finished per second over the last minute.",
          m.evaluations_per_s_60);
    counter("leap_serve_submitted_total", "Evaluations accepted.", static_cast<double>(m.submitted));
    counter("leap_serve_rejected_total", "Requests refused with 429 (queue full).", static_cast<double>(m.rejected_full));
    counter("leap_serve_results_cache_hits_total", "Evaluations answered from an earlier identical one.",
            static_cast<double>(m.results_cache_hits));
    counter("leap_serve_compiles_total", "Candidates compiled or found in the compile cache.", static_cast<double>(m.compiled));
    counter("leap_serve_compile_cache_hits_total", "Compiles answered from the compile cache.",
            static_cast<double>(m.compile_cache_hits));
    gauge("leap_serve_compile_cache_hit_ratio", "Compile cache hits over compiles.",
          m.compiled ? static_cast<double>(m.compile_cache_hits) / static_cast<double>(m.compiled) : 0.0);
    o << "# HELP leap_serve_evaluations_total Finished evaluations by status.\n# TYPE leap_serve_evaluations_total counter\n";
    for (const auto& [status, n] : m.by_status) o << "leap_serve_evaluations_total{status=\"" << status << "\"} " << n << "\n";
    o << "# HELP leap_serve_latency_seconds Submission to outcome.\n# TYPE leap_serve_latency_seconds histogram\n";
    for (size_t b = 0; b < m.latency_buckets_s.size(); ++b)
      o << "leap_serve_latency_seconds_bucket{le=\"" << m.latency_buckets_s[b] << "\"} " << m.latency_counts[b] << "\n";
    o << "leap_serve_latency_seconds_bucket{le=\"+Inf\"} " << m.latency_counts.back() << "\n";
    o << "leap_serve_latency_seconds_sum " << m.latency_sum_s << "\nleap_serve_latency_seconds_count " << m.latency_count
      << "\n";
    res.set_content(o.str(), "text/plain; version=0.0.4");
  });
}

}  // namespace leap::serve
