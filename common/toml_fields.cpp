#include "common/toml_fields.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace leap {

toml::table parse_toml(const std::string& text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw LeapError(origin + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": " +
                    std::string(e.description()));
  }
}

toml::table parse_toml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw LeapError(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_toml(ss.str(), path);
}

void TomlFields::fail(const std::string& key, const std::string& why) const {
  if (const auto* n = table_.get(key)) fail_at(*n, key, why);  // the value's own line
  auto line = table_.source().begin.line;
  throw LeapError(file_ + ":" + std::to_string(line) + ": field '" + path(key) + "': " + why);
}

void TomlFields::fail_at(const toml::node& n, const std::string& key, const std::string& why) const {
  auto line = n.source().begin.line;
  if (line == 0) line = table_.source().begin.line;
  throw LeapError(file_ + ":" + std::to_string(line) + ": field '" + path(key) + "': " + why);
}

const toml::node& TomlFields::node(const std::string& key) const {
  auto* n = table_.get(key);
  if (!n) fail(key, "missing");
  return *n;
}

std::string TomlFields::str(const std::string& key) const {
  const auto& n = node(key);
  if (!n.is_string()) fail_at(n, key, "expected a string");
  return n.as_string()->get();
}

std::optional<std::string> TomlFields::opt_str(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return str(key);
}

double TomlFields::num(const std::string& key) const {
  const auto& n = node(key);
  if (n.is_floating_point()) return n.as_floating_point()->get();
  if (n.is_integer()) return static_cast<double>(n.as_integer()->get());
  fail_at(n, key, "expected a number");
}

std::optional<double> TomlFields::opt_num(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return num(key);
}

int64_t TomlFields::integer(const std::string& key) const {
  const auto& n = node(key);
  if (!n.is_integer()) fail_at(n, key, "expected an integer");
  return n.as_integer()->get();
}

std::optional<int64_t> TomlFields::opt_integer(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return integer(key);
}

std::optional<bool> TomlFields::opt_bool(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  const auto& n = node(key);
  if (!n.is_boolean()) fail_at(n, key, "expected true or false");
  return n.as_boolean()->get();
}

std::optional<std::vector<std::string>> TomlFields::opt_str_list(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  const auto& n = node(key);
  if (!n.is_array()) fail_at(n, key, "expected an array of strings");
  std::vector<std::string> out;
  for (const auto& item : *n.as_array()) {
    if (!item.is_string()) fail_at(item, key, "expected an array of strings");
    out.push_back(item.as_string()->get());
  }
  return out;
}

const toml::table* TomlFields::opt_table(const std::string& key) const {
  if (!has(key)) return nullptr;
  const auto& n = node(key);
  if (!n.is_table()) fail_at(n, key, "expected a table");
  return n.as_table();
}

const toml::array* TomlFields::opt_array(const std::string& key) const {
  if (!has(key)) return nullptr;
  const auto& n = node(key);
  if (!n.is_array()) fail_at(n, key, "expected an array");
  return n.as_array();
}

void TomlFields::only(const std::vector<std::string>& allowed) const {
  for (const auto& [k, v] : table_) {
    std::string key(k.str());
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) fail_at(v, key, "unknown field");
  }
}

}  // namespace leap
