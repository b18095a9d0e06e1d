// KernelGYM's shape: POST /evaluate -> GET /status/{task_id} -> GET /results/{task_id}, with its
// field names; the same service and judge behind them as leap's own endpoints.
#include <httplib.h>

#include <map>

#include "serve/http_api.h"
#include "serve/http_json.h"
#include "prompt/verdict.h"
#include "tasks/candidates.h"

namespace leap::serve {
namespace {

std::string gym_state(const JobView& v) {
  if (v.state == JobState::queued) return "pending";
  if (v.state == JobState::running) return "processing";
  return v.outcome.status == Status::infra_error ? "failed" : "completed";
}

// The task a request names, or the one whose PyTorch source it sends as `reference_code`.
std::string task_of(const EvalService& svc, const json& j) {
  std::string task = str_field(j, "task", "task", false);
  if (!task.empty()) return task;
  std::string ref = normalized(str_field(j, "reference_code", "reference_code", false));
  if (ref.empty()) throw BadRequest{"reference_code", "name the task ('task') or send its 'reference_code'"};
  for (const auto& t : svc.tasks())
    if (!t.torch_code.empty() && normalized(t.torch_code) == ref) task = t.name;
  if (task.empty())
    throw BadRequest{"reference_code", "'reference_code' is not the PyTorch source of a served task; name the task "
                                       "with 'task' (GET /v1/tasks)"};
  return task;
}

}  // namespace

void HttpApi::gym_evaluate(const httplib::Request& req, httplib::Response& res) {
  json j = parse_body(req);
  for (auto it = j.begin(); it != j.end();)  // KernelGYM clients send null for what they leave unset
    it = it->is_null() ? j.erase(it) : std::next(it);
  std::string client_id = str_field(j, "task_id", "task_id", true);
  if (client_id.empty() || client_id.size() > 100) throw BadRequest{"task_id", "'task_id' must be 1-100 characters"};
  Submission s;
  s.settings = service_.eval_defaults();
  s.client_id = client_id;
  s.source = str_field(j, "kernel_code", "kernel_code", true);
  if (s.source.find_first_not_of(" \t\r\n") == std::string::npos) throw BadRequest{"kernel_code", "'kernel_code' is empty"};
  s.task = task_of(service_, j);
  const Task* t = service_.task(s.task);
  if (!t || !t->supports(service_.backend())) throw BadRequest{"task", "unknown task '" + s.task + "' for this server"};
  // KernelGYM's kernel_code is a ModelNew module as often as not: told apart by its content.
  s.format = detect_format(s.source);
  s.name = s.task + (s.format == CandidateFormat::kernelbench ? ".py" : service_.backend() == Backend::cuda ? ".cu" : ".cpp");
  auto count = [&](const char* f, uint64_t lo, uint64_t hi) { return count_field(j, f, f, lo, hi); };
  json chosen = json::object();
  if (auto v = count("num_correct_trials", 1, cfg_.max_trials)) s.settings.trials = static_cast<uint32_t>(*v), chosen["trials"] = *v;
  if (auto v = count("num_perf_trials", 1, 1000)) s.settings.min_samples = static_cast<uint32_t>(*v), chosen["min_samples"] = *v;
  if (auto v = count("num_warmup", 0, 100)) s.settings.warmup_calls = static_cast<uint32_t>(*v), chosen["warmup"] = *v;
  s.settings_key = chosen.dump();
  if (auto it = j.find("force_refresh"); it != j.end() && !it->is_boolean())
    throw BadRequest{"force_refresh", "'force_refresh' must be true or false"};
  if (j.value("force_refresh", false)) s.settings_key += " refresh@" + std::to_string(unix_seconds());
  auto r = service_.submit(std::move(s));
  if (r.kind != SubmitResult::Kind::accepted) return refuse(res, r.kind);
  send_json(res, 200, {{"task_id", client_id}, {"status", "pending"}});
}

void HttpApi::gym_status(const httplib::Request& req, httplib::Response& res) {
  const std::string client_id = req.matches[1];
  auto v = service_.get(service_.id_of_client(client_id));
  if (!v) return send_error(res, 404, "unknown task_id '" + client_id + "'");
  json j{{"task_id", client_id}, {"status", gym_state(*v)}};
  if (v->state == JobState::queued) j["queue_position"] = v->queue_position;
  send_json(res, 200, j);
}

void HttpApi::gym_results(const httplib::Request& req, httplib::Response& res) {
  const std::string client_id = req.matches[1];
  auto v = service_.get(service_.id_of_client(client_id));
  if (!v) return send_error(res, 404, "unknown task_id '" + client_id + "'");
  json j{{"task_id", client_id}, {"status", gym_state(*v)}};
  if (v->state != JobState::done) return send_json(res, 202, j);
  const auto& o = v->outcome;
  const bool ok = o.status == Status::ok;
  j["compiled"] = o.status != Status::compile_error;
  j["correctness"] = ok;
  j["reference_runtime"] = o.reference_timing.median_us / 1000;  // ms, as KernelBench reports
  j["kernel_runtime"] = ok ? json(o.candidate_timing.median_us / 1000) : json(nullptr);
  j["speedup"] = ok ? json(o.speedup) : json(nullptr);
  j["metadata"] = {{"gpu_name", service_.device_model()}, {"backend", to_string(o.backend)},
                   {"leap_status", to_string(o.status)}, {"check", to_string(o.check)}, {"cached", v->cached}, {"id", v->id},
                   {"feedback_text", prompt::feedback_text(o)}};
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
}

}  // namespace leap::serve
