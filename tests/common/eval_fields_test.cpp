// [eval]'s one declaration (common/eval_fields.h) through each of its readers: a TOML file that
// sets every field, the wire both ways, JSON, the service's per-request setter, and each range.
#include <capnp/message.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sstream>
#include <type_traits>

#include "common/config.h"
#include "common/error.h"
#include "common/outcome_proto.h"

namespace leap {
namespace {

// A value of the field other than its default and within its range.
template <typename T>
T other(T value) {
  if constexpr (std::is_same_v<T, bool>) return !value;
  else return static_cast<T>(value + 1);
}

template <typename T>
std::string toml(T v) {
  if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
  std::ostringstream s;
  s << v;
  std::string out = s.str();
  if (std::is_floating_point_v<T> && out.find('.') == std::string::npos) out += ".0";
  return out;
}

TEST(EvalFields, EveryFieldIsReadFromTomlCrossesTheWireAndIsInTheJson) {
  const EvalConfig defaults;
  std::string text = "[eval]\n";
#define LEAP_TEST_TOML(type, name, wire, value, range, meaning) text += #name " = " + toml(other(defaults.name)) + "\n";
  LEAP_EVAL_FIELDS(LEAP_TEST_TOML)
#undef LEAP_TEST_TOML
  const EvalConfig e = parse_config(text, "leap.toml").eval;
  capnp::MallocMessageBuilder m;
  auto b = m.initRoot<proto::EvalSettings>();
  to_proto(e, b);
  const EvalConfig back = from_proto(b.asReader());
  nlohmann::json j = e;
  size_t fields = 0;
#define LEAP_TEST_FIELD(type, name, wire, value, range, meaning)        \
  ++fields;                                                             \
  EXPECT_EQ(e.name, other(defaults.name)) << #name " from TOML";        \
  EXPECT_EQ(back.name, e.name) << #name " across the wire";             \
  EXPECT_EQ(j.at(#name).get<type>(), e.name) << #name " in the JSON";
  LEAP_EVAL_FIELDS(LEAP_TEST_FIELD)
#undef LEAP_TEST_FIELD
  EXPECT_EQ(j.size(), fields);
}

TEST(EvalFields, EachRangeRefusesWhatItMustInTomlAndInARequest) {
  auto error_of = [](const std::string& text) {
    try {
      parse_config(text, "leap.toml");
    } catch (const LeapError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("[eval]\ntrials = 0\n").find("'eval.trials': must be > 0"), std::string::npos);
  EXPECT_NE(error_of("[eval]\nseed = -1\n").find("'eval.seed': must be >= 0"), std::string::npos);
  EXPECT_NE(error_of("[eval]\nslow_stop_ratio = 0.5\n").find("'eval.slow_stop_ratio': must be 0 (off) or >= 1"),
            std::string::npos);
  EXPECT_EQ(error_of("[eval]\nslow_stop_ratio = 0\ncall_limit_ratio = 0\n"), "");  // 0: off
  EXPECT_NE(error_of("[eval]\nverified_timed_calls = 1001\n").find("must be in 0..1000"), std::string::npos);
  EXPECT_NE(error_of("[eval]\nmax_feedback_bytes = 255\n").find("must be >= 256"), std::string::npos);
  EXPECT_NE(error_of("[eval]\ntiming_budget_ms = 0\n").find("must be > 0"), std::string::npos);
  EXPECT_NE(error_of("[eval]\nprofile = 1\n").find("'eval.profile'"), std::string::npos);
  EXPECT_NE(error_of("[eval]\nmin_samples = 50\nmax_samples = 10\n").find("must be >= min_samples"), std::string::npos);
  // An integer is taken whole: never wrapped into the field's type, never rounded through a double.
  EXPECT_NE(error_of("[eval]\ntrials = 4294967296\n").find("'eval.trials': must be at most 4294967295"),
            std::string::npos);
  EXPECT_EQ(parse_config("[eval]\nseed = 9007199254740993\n", "leap.toml").eval.seed, 9007199254740993ull);

  // A request's settings: the field's type and range, and the service's cap.
  EvalConfig e;
  EXPECT_EQ(set_eval_field(e, "trials", nlohmann::json(3), 64), std::nullopt);
  EXPECT_EQ(e.trials, 3u);
  EXPECT_EQ(set_eval_field(e, "trials", nlohmann::json("3"), 64), "must be an integer in 1..64");
  EXPECT_EQ(set_eval_field(e, "trials", nlohmann::json(65), 64), "must be an integer in 1..64");
  EXPECT_EQ(set_eval_field(e, "trials", nlohmann::json(0), 64), "must be an integer in 1..64");
  EXPECT_EQ(set_eval_field(e, "trials", nlohmann::json(2.5), 64), "must be an integer in 1..64");
  EXPECT_EQ(set_eval_field(e, "seed", nlohmann::json(-1)), "must be an integer >= 0");
  EXPECT_EQ(set_eval_field(e, "seed", nlohmann::json(UINT64_MAX)), std::nullopt);
  EXPECT_EQ(e.seed, UINT64_MAX);
  EXPECT_EQ(set_eval_field(e, "timing_budget_ms", nlohmann::json(0), 5000), "must be a number in (0, 5000]");
  EXPECT_EQ(set_eval_field(e, "timing_budget_ms", nlohmann::json(12.5), 5000), std::nullopt);
  EXPECT_DOUBLE_EQ(e.timing_budget_ms, 12.5);
  EXPECT_EQ(set_eval_field(e, "min_samples", nlohmann::json(1ull << 33)), "must be at most 4294967295");
  EXPECT_EQ(set_eval_field(e, "profile", nlohmann::json(1)), "must be true or false");
  EXPECT_EQ(set_eval_field(e, "deadline_s", nlohmann::json(1)), "is not an [eval] field");
  EXPECT_EQ(e.trials, 3u);  // a refused value changes nothing
}

}  // namespace
}  // namespace leap
