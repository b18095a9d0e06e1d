// The JSON side of leap serve's HTTP API: request fields checked one by one (a wrong field is a
// 400 naming it), responses, and the service's records as the API shows them.
#pragma once
#include <httplib.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "common/config.h"
#include "serve/eval_service.h"

namespace leap::serve {

using json = nlohmann::json;

// A request the client must fix: HTTP 400 naming the field.
struct BadRequest {
  std::string field, message;
};

void send_json(httplib::Response& res, int status, const json& j);
void send_error(httplib::Response& res, int status, const std::string& message, const std::string& field = "");
std::string iso_time(double unix_s);  // "2026-12-03T16:40:46.123Z"; "" for 0

json parse_body(const httplib::Request& req);  // a JSON object, else BadRequest
std::string str_field(const json& j, const std::string& field, const std::string& path, bool required);
// An optional integer field within lo..hi; anything else a 400 naming `path`.
std::optional<uint64_t> count_field(const json& j, const std::string& field, const std::string& path, uint64_t lo,
                                    uint64_t hi);
// An optional number of seconds in (0, hi]; `dflt` when absent; anything else a 400 naming it.
double seconds_field(const json& j, const std::string& field, double dflt, double hi);
void only_fields(const json& j, const std::set<std::string>& allowed, const std::string& prefix);
bool valid_name(const std::string& s);  // a candidate's file name: [A-Za-z0-9._-], not starting with '.'
// Lines of a source, trailing blanks dropped: a reference the client sends matches a task's
// PyTorch source whatever its line endings and trailing whitespace.
std::string normalized(const std::string& code);

// Settings a request may choose, within the server's limits; `key`: what it chose.
EvalConfig settings_of(const ServeConfig& cfg, const json& j, const std::string& path, EvalConfig base, std::string* key);
// One candidate of /v1/evaluate, /v1/eval or /v1/batch (`prefix`: where it sits in the body).
Submission submission_of(const EvalService& svc, const ServeConfig& cfg, const json& j, const std::string& prefix,
                         const EvalConfig& base, const json* shared_settings);
// The Idempotency-Key header: a client retrying after a broken connection gets the first id.
Submission with_key(Submission s, const httplib::Request& req);
json record(const EvalService& svc, const JobView& v);  // a finished evaluation
json status_of(const JobView& v);                       // where an evaluation is
void refuse(httplib::Response& res, SubmitResult::Kind k);  // 422, 429 or 503

}  // namespace leap::serve
