// Typed field access over toml++ tables with errors that name file, line and field.
#pragma once
#include <toml++/toml.h>

#include <optional>
#include <string>
#include <vector>

namespace leap {

class TomlFields {
 public:
  TomlFields(const toml::table& table, std::string file, std::string prefix = "")
      : table_(table), file_(std::move(file)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& why) const;
  [[noreturn]] void fail_at(const toml::node& node, const std::string& key, const std::string& why) const;

  bool has(const std::string& key) const { return table_.contains(key); }
  std::string str(const std::string& key) const;
  std::optional<std::string> opt_str(const std::string& key) const;
  double num(const std::string& key) const;
  std::optional<double> opt_num(const std::string& key) const;
  int64_t integer(const std::string& key) const;
  std::optional<int64_t> opt_integer(const std::string& key) const;
  std::optional<bool> opt_bool(const std::string& key) const;
  std::optional<std::vector<std::string>> opt_str_list(const std::string& key) const;
  const toml::table* opt_table(const std::string& key) const;
  const toml::array* opt_array(const std::string& key) const;
  // Rejects keys outside `allowed` (typos must not be silently ignored).
  void only(const std::vector<std::string>& allowed) const;

  const std::string& file() const { return file_; }
  std::string path(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }
  const toml::table& table() const { return table_; }

 private:
  const toml::node& node(const std::string& key) const;
  const toml::table& table_;
  std::string file_;
  std::string prefix_;
};

// Parses TOML text; throws LeapError "file:line:col: message" on syntax errors.
toml::table parse_toml(const std::string& text, const std::string& origin);
toml::table parse_toml_file(const std::string& path);

}  // namespace leap
