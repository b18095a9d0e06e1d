#include "serve/http_json.h"
#include "tasks/candidates.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "prompt/verdict.h"

namespace leap::serve {

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& field) {
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

std::optional<uint64_t> count_field(const json& j, const std::string& field, const std::string& path, uint64_t lo,
                                    uint64_t hi) {
  auto it = j.find(field);
  if (it == j.end()) return std::nullopt;
  if (!it->is_number_integer() || it->get<int64_t>() < static_cast<int64_t>(lo) || it->get<uint64_t>() > hi)
    throw BadRequest{path, "'" + path + "' must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi)};
  return it->get<uint64_t>();
}

double seconds_field(const json& j, const std::string& field, double dflt, double hi) {
  auto it = j.find(field);
  if (it == j.end()) return dflt;
  if (!it->is_number() || !(it->get<double>() > 0) || it->get<double>() > hi)
    throw BadRequest{field, "'" + field + "' must be a number of seconds in (0, " + std::to_string(hi) + "]"};
  return it->get<double>();
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

EvalConfig settings_of(const ServeConfig& cfg, const json& j, const std::string& path, EvalConfig base, std::string* key) {
  if (!j.is_object()) throw BadRequest{path, "'" + path + "' must be an object"};
  // The [eval] fields a request may set, each at most the service's cap; their types and least
  // values are [eval]'s own (common/eval_fields.h).
  const std::map<std::string, double> caps = {{"trials", static_cast<double>(cfg.max_trials)},
                                              {"timing_budget_ms", cfg.max_timing_budget_ms},
                                              {"min_samples", 1000},
                                              {"seed", static_cast<double>(UINT64_MAX)}};
  std::set<std::string> names;
  for (const auto& [name, cap] : caps) names.insert(name);
  only_fields(j, names, path + ".");
  for (const auto& [name, value] : j.items())
    if (auto why = set_eval_field(base, name, value, caps.at(name)))
      throw BadRequest{path + "." + name, "'" + path + "." + name + "' " + *why};
  *key = j.dump();
  return base;
}

Submission submission_of(const EvalService& svc, const ServeConfig& cfg, const json& j, const std::string& prefix,
                         const EvalConfig& base, const json* shared_settings) {
  Submission s;
  s.task = str_field(j, "task", prefix + "task", true);
  const Task* t = svc.task(s.task);
  if (!t) throw BadRequest{prefix + "task", "unknown task '" + s.task + "' (GET /v1/tasks lists them)"};
  if (!t->supports(svc.backend()))
    throw BadRequest{prefix + "task", "task '" + s.task + "' has no sizes for the " + to_string(svc.backend()) + " backend"};
  s.source = str_field(j, "source", prefix + "source", true);
  if (s.source.find_first_not_of(" \t\r\n") == std::string::npos)
    throw BadRequest{prefix + "source", "'" + prefix + "source' is empty"};
  std::string format = str_field(j, "format", prefix + "format", false);
  if (!format.empty() && !format_from(format))
    throw BadRequest{prefix + "format", "'" + prefix + "format' must be \"leap\" or \"kernelbench\""};
  s.format = format.empty() ? detect_format(s.source) : *format_from(format);
  s.name = str_field(j, "name", prefix + "name", false);
  if (s.name.empty())
    s.name = s.task + (s.format == CandidateFormat::kernelbench ? ".py" : svc.backend() == Backend::cuda ? ".cu" : ".cpp");
  if (!valid_name(s.name))
    throw BadRequest{prefix + "name", "'" + prefix + "name' must be 1-200 of [A-Za-z0-9._-], not starting with '.'"};
  std::string backend = str_field(j, "backend", prefix + "backend", false);
  if (!backend.empty() && backend != to_string(svc.backend()))
    throw BadRequest{prefix + "backend", "this server evaluates on the " + to_string(svc.backend()) + " backend, not '" +
                                             backend + "'"};
  s.settings = base;
  if (auto it = j.find("settings"); it != j.end())
    s.settings = settings_of(cfg, *it, prefix + "settings", base, &s.settings_key);
  else if (shared_settings)
    s.settings = settings_of(cfg, *shared_settings, "settings", base, &s.settings_key);
  return s;
}

Submission with_key(Submission s, const httplib::Request& req) {
  s.idempotency_key = req.get_header_value("Idempotency-Key");
  if (req.has_header("Idempotency-Key") &&
      (s.idempotency_key.empty() || s.idempotency_key.size() > 200 ||
       std::any_of(s.idempotency_key.begin(), s.idempotency_key.end(), [](char c) { return c < 0x21 || c > 0x7e; })))
    throw BadRequest{"Idempotency-Key", "the Idempotency-Key header must be 1-200 printable ASCII characters"};
  return s;
}

json record(const EvalService& svc, const JobView& v) {
  json j = to_json(v.outcome);
  j["id"] = v.id;
  j["state"] = to_string(v.state);
  j["cached"] = v.cached;
  j["feedback_text"] = prompt::feedback_text(v.outcome);
  j["device"] = svc.device_model();
  j["submitted_at"] = iso_time(v.submitted_s);
  j["finished_at"] = iso_time(v.finished_s);
  return j;
}

json status_of(const JobView& v) {
  json j{{"id", v.id}, {"state", to_string(v.state)}};
  if (v.state == JobState::queued) j["queue_position"] = v.queue_position;
  if (v.state == JobState::done) j["status"] = to_string(v.outcome.status);
  return j;
}

void refuse(httplib::Response& res, SubmitResult::Kind k) {
  if (k == SubmitResult::Kind::key_reused) {
    send_error(res, 422, "this Idempotency-Key was used for a different submission", "Idempotency-Key");
  } else if (k == SubmitResult::Kind::queue_full) {
    res.set_header("Retry-After", "1");
    send_error(res, 429, "the evaluation queue is full ([serve] queue_limit): retry after a second");
  } else {
    res.set_header("Retry-After", "5");
    send_error(res, 503, "leap serve is shutting down");
  }
}

}  // namespace leap::serve
