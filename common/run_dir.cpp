#include "common/run_dir.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace fs = std::filesystem;

namespace leap {

std::string checkpoint_dir(const std::string& run_dir, int completed_steps) {
  return fmt::format("{}/checkpoints/step-{:06d}", run_dir, completed_steps);
}

std::optional<CheckpointRef> latest_checkpoint(const std::string& run_dir) {
  std::optional<CheckpointRef> best;
  fs::path root = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(root)) return best;
  for (const auto& e : fs::directory_iterator(root)) {
    std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("step-", 0) != 0 || name.size() != 11) continue;  // skips *.tmp
    if (!fs::exists(e.path() / "state.json")) continue;
    int step = std::stoi(name.substr(5));
    if (!best || step > best->step) best = CheckpointRef{e.path().string(), step};
  }
  return best;
}

void append_jsonl(const std::string& path, const nlohmann::json& record) {
  append_jsonl_lines(path, {record});
}

void append_jsonl_lines(const std::string& path, const std::vector<nlohmann::json>& records) {
  std::string text;
  for (const auto& r : records) text += r.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::ofstream out(path, std::ios::app);
  out << text << std::flush;
  if (!out) throw LeapError(path + ": cannot append");
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw LeapError(path + ": cannot read");
  std::vector<nlohmann::json> out;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) throw LeapError(path + ":" + std::to_string(n) + ": not a JSON record");
    out.push_back(std::move(j));
  }
  return out;
}

void truncate_jsonl(const std::string& path, int step) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;  // a line cut short when the run was stopped
    if (j.value("step", 0) < step) kept += line + "\n";
  }
  in.close();
  std::string tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::trunc) << kept;
  fs::rename(tmp, path);
}

}  // namespace leap
