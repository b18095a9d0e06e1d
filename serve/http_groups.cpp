// The DCP group register's endpoints (learner/group_register.h): POST /v1/groups/{group}/turn1 and
// GET /v1/groups/{group}.
#include <httplib.h>

#include "common/clock.h"
#include "common/error.h"
#include "learner/group_register.h"
#include "serve/http_api.h"
#include "serve/http_json.h"

namespace leap::serve {
namespace {

json group_json(const std::string& id, const GroupState& s, int max_turns, double now) {
  json j{{"group", id},       {"group_size", s.group_size}, {"reported", s.reported}, {"failed", s.failed},
         {"voided", s.voided}, {"max_turns", max_turns}};
  if (s.late) {
    j["decision"] = "stop";  // decided without this rollout: it takes no further turn
    j["late"] = true;
  } else {
    j["decision"] = !s.decided ? "pending" : s.refine ? "refine" : "stop";
  }
  if (s.decided) j["difficulty"] = to_string(s.difficulty);
  else j["deadline_s"] = std::max(0.0, s.deadline - now);
  return j;
}

std::string group_id(const httplib::Request& req) {
  std::string id = req.matches[1];
  if (!valid_name(id)) throw BadRequest{"group", "the group id must be 1-200 of [A-Za-z0-9._-], not starting with '.'"};
  return id;
}

bool bool_field(const json& j, const std::string& field, bool required) {
  auto it = j.find(field);
  if (it == j.end()) {
    if (required) throw BadRequest{field, "'" + field + "' is required (true or false)"};
    return false;
  }
  if (!it->is_boolean()) throw BadRequest{field, "'" + field + "' must be true or false"};
  return it->get<bool>();
}

}  // namespace

void HttpApi::v1_group_turn1(const httplib::Request& req, httplib::Response& res) {
  const std::string id = group_id(req);
  json j = parse_body(req);
  only_fields(j, {"group_size", "correct", "infra_error", "deadline_s"}, "");
  const auto size = count_field(j, "group_size", "group_size", 2, 4096);
  if (!size) throw BadRequest{"group_size", "'group_size' is required: the group's rollouts (verl's rollout.n)"};
  const bool correct = bool_field(j, "correct", true), infra = bool_field(j, "infra_error", false);
  const double deadline = seconds_field(j, "deadline_s", 300, 86400);
  const double now = monotonic_seconds();
  try {
    auto s = dcp_->report(id, static_cast<int>(*size), correct, infra, deadline, now);
    send_json(res, 200, group_json(id, s, dcp_->max_turns(), now));
  } catch (const RegisterError& e) {
    const int status = e.kind == RegisterError::Kind::invalid  ? 400
                       : e.kind == RegisterError::Kind::conflict ? 409
                                                                 : 503;
    send_error(res, status, e.what(), e.field);
  }
}

void HttpApi::v1_group(const httplib::Request& req, httplib::Response& res) {
  const double now = monotonic_seconds();
  std::string id = req.matches[1];
  auto s = dcp_->get(id, now);
  if (!s) return send_error(res, 404, "no rollout of group '" + id + "' has reported");
  send_json(res, 200, group_json(id, *s, dcp_->max_turns(), now));
}

}  // namespace leap::serve
