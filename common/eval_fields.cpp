#include "common/eval_fields.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <type_traits>

#include "common/config.h"

namespace leap {
namespace {

std::string number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e18) return std::to_string(static_cast<long long>(v));
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  return s;
}

template <typename T>
std::optional<std::string> set_from(T& out, const nlohmann::json& v, const FieldRange& r, double cap) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return std::string("must be true or false");
    out = v.get<bool>();
  } else {
    FieldRange capped = r;
    capped.hi = std::min(r.hi, cap);
    constexpr bool integral = std::is_integral_v<T>;
    const std::string want = (integral ? "must be an integer " : "must be a number ") + capped.text(integral).substr(8);
    if (integral ? !v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0) : !v.is_number())
      return want;
    const double x = integral ? static_cast<double>(v.get<uint64_t>()) : v.get<double>();
    if (!capped.allows(x)) return want;
    if constexpr (integral) {
      if (v.get<uint64_t>() > std::numeric_limits<T>::max())
        return "must be at most " + std::to_string(std::numeric_limits<T>::max());
    }
    out = v.get<T>();
  }
  return std::nullopt;
}

}  // namespace

bool FieldRange::allows(double v) const {
  if (zero_off && v == 0) return true;
  if (!(lo_open ? v > lo : v >= lo)) return false;
  return v <= hi;
}

std::string FieldRange::text(bool integral) const {
  const std::string off = zero_off ? "0 (off) or " : "";
  if (std::isinf(hi)) return "must be " + off + (lo_open ? "> " : ">= ") + number(lo);
  if (integral && lo_open) return "must be " + off + "in " + number(std::floor(lo) + 1) + ".." + number(hi);
  if (!lo_open) return "must be " + off + "in " + number(lo) + ".." + number(hi);
  return "must be " + off + "in (" + number(lo) + ", " + number(hi) + "]";
}

std::optional<std::string> set_eval_field(EvalConfig& e, const std::string& name, const nlohmann::json& v, double cap) {
#define LEAP_EVAL_JSON(type, field, wire, value, range, meaning) \
  if (name == #field) return set_from(e.field, v, range, cap);
  LEAP_EVAL_FIELDS(LEAP_EVAL_JSON)
#undef LEAP_EVAL_JSON
  return "is not an [eval] field";
}

void to_json(nlohmann::json& j, const EvalConfig& e) {
  j = nlohmann::json::object();
#define LEAP_EVAL_TO_JSON(type, field, wire, value, range, meaning) j[#field] = e.field;
  LEAP_EVAL_FIELDS(LEAP_EVAL_TO_JSON)
#undef LEAP_EVAL_TO_JSON
}

}  // namespace leap
