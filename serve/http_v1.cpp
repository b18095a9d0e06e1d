// leap's own endpoints (/v1/...), /health and /metrics.
#include <httplib.h>

#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "common/clock.h"
#include "serve/http_api.h"
#include "serve/http_json.h"

namespace leap::serve {
namespace {

const std::set<std::string> kCandidateFields = {"task", "source", "name", "backend", "settings", "format"};

}  // namespace

void HttpApi::v1_evaluate(const httplib::Request& req, httplib::Response& res) {
  json j = parse_body(req);
  only_fields(j, kCandidateFields, "");
  auto r = service_.submit(with_key(submission_of(service_, cfg_, j, "", service_.eval_defaults(), nullptr), req));
  if (r.kind != SubmitResult::Kind::accepted) return refuse(res, r.kind);
  auto v = service_.get(r.id);
  json out{{"id", r.id}, {"state", v ? to_string(v->state) : "queued"}};
  if (r.repeated) out["repeated"] = true;
  send_json(res, 202, out);
}

void HttpApi::v1_status(const httplib::Request& req, httplib::Response& res) {
  auto v = service_.get(req.matches[1]);
  if (!v) return send_error(res, 404, "unknown evaluation id '" + std::string(req.matches[1]) + "'");
  send_json(res, 200, status_of(*v));
}

void HttpApi::v1_results(const httplib::Request& req, httplib::Response& res) {
  auto v = service_.get(req.matches[1]);
  if (!v) return send_error(res, 404, "unknown evaluation id '" + std::string(req.matches[1]) + "'");
  if (v->state != JobState::done) return send_json(res, 202, status_of(*v));
  send_json(res, 200, record(service_, *v));
}

void HttpApi::v1_eval(const httplib::Request& req, httplib::Response& res) {
  json j = parse_body(req);
  auto fields = kCandidateFields;
  fields.insert("timeout_s");
  only_fields(j, fields, "");
  const double timeout = seconds_field(j, "timeout_s", std::min(cfg_.max_wait_s, 300.0), cfg_.max_wait_s);
  auto r = service_.submit(with_key(submission_of(service_, cfg_, j, "", service_.eval_defaults(), nullptr), req));
  if (r.kind != SubmitResult::Kind::accepted) return refuse(res, r.kind);
  auto v = service_.wait(r.id, timeout);
  if (!v || v->state != JobState::done) {
    json out = v ? status_of(*v) : json{{"id", r.id}};
    out["error"] = "not finished within " + std::to_string(timeout) + " s: GET /v1/results/" + r.id + " later";
    return send_json(res, 504, out);
  }
  send_json(res, 200, record(service_, *v));
}

// Every candidate checked before any is queued; the answer is one NDJSON line per candidate as it
// finishes (`index`: its place in the request).
void HttpApi::v1_batch(const httplib::Request& req, httplib::Response& res) {
  json j = parse_body(req);
  only_fields(j, {"candidates", "settings", "timeout_s"}, "");
  auto cands = j.find("candidates");
  if (cands == j.end() || !cands->is_array() || cands->empty())
    throw BadRequest{"candidates", "'candidates' must be a non-empty array"};
  const double timeout = seconds_field(j, "timeout_s", cfg_.max_wait_s, cfg_.max_wait_s);
  const json* shared = j.contains("settings") ? &j["settings"] : nullptr;
  // Lines sent before any outcome: items refused (a task this server does not have, or the queue
  // filled while submitting): that item's answer, not the batch's end.
  auto early = std::make_shared<std::vector<json>>();
  std::vector<std::pair<size_t, Submission>> subs;
  for (size_t i = 0; i < cands->size(); ++i) {
    const std::string prefix = "candidates[" + std::to_string(i) + "].";
    if (!(*cands)[i].is_object()) throw BadRequest{prefix.substr(0, prefix.size() - 1), "each candidate must be an object"};
    only_fields((*cands)[i], kCandidateFields, prefix);
    const auto& task = (*cands)[i].find("task");
    if (task != (*cands)[i].end() && task->is_string() && !service_.task(task->get<std::string>())) {
      early->push_back({{"index", i}, {"state", "refused"}, {"field", prefix + "task"},
                        {"error", "unknown task '" + task->get<std::string>() + "' (GET /v1/tasks lists them)"}});
      continue;
    }
    subs.emplace_back(i, submission_of(service_, cfg_, (*cands)[i], prefix, service_.eval_defaults(), shared));
  }
  if (subs.size() > service_.free_slots()) {
    res.set_header("Retry-After", "1");
    return send_error(res, 429, "the queue has room for " + std::to_string(service_.free_slots()) + " evaluations, not " +
                                    std::to_string(subs.size()) + ": retry later or send fewer");
  }
  auto pending = std::make_shared<std::vector<std::string>>();
  auto index = std::make_shared<std::map<std::string, size_t>>();
  for (auto& [i, sub] : subs) {
    auto r = service_.submit(std::move(sub));
    if (r.kind != SubmitResult::Kind::accepted) {
      if (pending->empty() && early->empty()) return refuse(res, r.kind);
      early->push_back({{"index", i}, {"state", "refused"}, {"error", "the queue filled"}});
      continue;
    }
    pending->push_back(r.id);
    (*index)[r.id] = i;
  }
  res.status = 200;
  auto& svc = service_;
  const auto deadline = after_seconds(timeout);
  res.set_chunked_content_provider(
      "application/x-ndjson", [&svc, pending, index, early, deadline](size_t, httplib::DataSink& sink) {
        auto send = [&sink](const json& line) {
          std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
          return sink.write(text.data(), text.size());
        };
        if (!early->empty()) {
          for (const auto& line : *early)
            if (!send(line)) return false;
          early->clear();
          return true;
        }
        if (!pending->empty() && millis_until(deadline) <= 0) {
          // The trainer's deadline: the rest are answered as unfinished (their results stay
          // available under their ids).
          for (const auto& id : *pending)
            if (!send({{"index", index->at(id)}, {"id", id}, {"state", "timed_out"},
                       {"error", "not finished within the batch's timeout_s: GET /v1/results/" + id + " later"}}))
              return false;
          pending->clear();
        }
        if (pending->empty()) {
          sink.done();
          return true;
        }
        auto v = svc.wait_any(*pending, std::min(1.0, std::max(0.001, millis_until(deadline) / 1000)));
        if (!v) return sink.is_writable();  // nothing finished this second; stop if the client left
        pending->erase(std::find(pending->begin(), pending->end(), v->id));
        json line = record(svc, *v);
        line["index"] = index->at(v->id);
        return send(line);
      });
}

void HttpApi::v1_tasks(const httplib::Request&, httplib::Response& res) {
  json list = json::array();
  for (const auto& t : service_.tasks()) {
    if (!t.supports(service_.backend())) continue;
    list.push_back({{"name", t.name}, {"level", t.level}, {"description", t.description}});
  }
  send_json(res, 200, {{"backend", to_string(service_.backend())}, {"tasks", list}});
}

void HttpApi::v1_task(const httplib::Request& req, httplib::Response& res) {
  const Task* t = service_.task(req.matches[1]);
  if (!t || !t->supports(service_.backend()))
    return send_error(res, 404, "unknown task '" + std::string(req.matches[1]) + "'");
  auto tensors = [&](const std::vector<TensorDecl>& ts) {
    json out = json::array();
    for (const auto& d : ts) {
      json e{{"name", d.name}, {"dtype", to_string(d.dtype)}, {"shape", t->shape(d, service_.backend())}};
      if (!d.parameter.empty()) e["parameter"] = d.parameter;
      out.push_back(e);
    }
    return out;
  };
  json params = json::object();
  for (const auto& [k, v] : t->params) params[k] = v;
  send_json(res, 200, {{"name", t->name}, {"level", t->level}, {"description", t->description},
                       {"torch_code", t->torch_code}, {"backend", to_string(service_.backend())},
                       {"inputs", tensors(t->inputs)}, {"outputs", tensors(t->outputs)}, {"params", params}});
}

void HttpApi::health(const httplib::Request&, httplib::Response& res) {
  auto m = service_.metrics();
  send_json(res, 200, {{"status", "ok"}, {"backend", to_string(service_.backend())}, {"device", service_.device_model()},
                       {"evaluators", m.evaluators}, {"queue_depth", m.queue_depth}, {"in_flight", m.in_flight},
                       {"workers_alive", m.workers_alive}, {"workers_lost", m.workers_lost}, {"requeued", m.requeued},
                       {"workers", service_.workers_json()}, {"uptime_s", m.uptime_s}});
}

void HttpApi::metrics(const httplib::Request&, httplib::Response& res) {
  auto m = service_.metrics();
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
}

}  // namespace leap::serve
