#include "tasks/candidates.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "common/paths.h"

namespace leap {
namespace fs = std::filesystem;

namespace {

std::vector<CandidateSource> from_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw LeapError(path + ": cannot open file");
  std::vector<CandidateSource> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string where = path + ":" + std::to_string(n);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw LeapError(where + ": not valid JSON: " + e.what());
    }
    if (!j.is_object()) throw LeapError(where + ": expected a JSON object");
    for (const char* key : {"task", "source"})
      if (!j.contains(key) || !j[key].is_string()) throw LeapError(where + ": field '" + key + "' (string) is required");
    CandidateSource c;
    c.task = j["task"];
    c.source = j["source"];
    c.name = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : c.task + "#" + std::to_string(n);
    c.origin = where;
    if (j.contains("format")) {
      auto f = j["format"].is_string() ? format_from(j["format"].get<std::string>()) : std::nullopt;
      if (!f) throw LeapError(where + ": field 'format' must be \"leap\" or \"kernelbench\"");
      c.format = *f;
    } else {
      c.format = detect_format(c.source);
    }
    out.push_back(std::move(c));
  }
  return out;
}

CandidateSource from_file(const fs::path& file, const std::string& task) {
  CandidateSource c;
  c.task = task;
  c.name = file.filename().string();
  c.source = read_file(file.string());
  c.origin = file.string();
  c.format = file.extension() == ".py" ? CandidateFormat::kernelbench : CandidateFormat::leap_abi;
  return c;
}

}  // namespace

std::vector<CandidateSource> load_candidates(const std::string& path, Backend backend) {
  if (fs::is_regular_file(path)) {
    if (fs::path(path).extension() == ".jsonl") return from_jsonl(path);
    std::string stem = fs::path(path).stem().string();
    return {from_file(path, stem.substr(0, stem.find('.')))};
  }
  if (!fs::is_directory(path)) throw LeapError(path + ": no such candidate folder or file");
  const std::string ext = backend == Backend::cpu ? ".cpp" : ".cu";
  auto candidate_file = [&](const fs::path& p) { return p.extension() == ext || p.extension() == ".py"; };
  std::vector<CandidateSource> out;
  for (const auto& e : fs::directory_iterator(path)) {
    if (e.is_regular_file() && candidate_file(e.path())) {
      std::string stem = e.path().stem().string();
      out.push_back(from_file(e.path(), stem.substr(0, stem.find('.'))));
    } else if (e.is_directory()) {
      for (const auto& f : fs::directory_iterator(e.path()))
        if (f.is_regular_file() && candidate_file(f.path())) {
          auto c = from_file(f.path(), e.path().filename().string());
          c.name = e.path().filename().string() + "/" + c.name;
          out.push_back(std::move(c));
        }
    }
  }
  if (out.empty()) throw LeapError(path + ": no candidate files (*" + ext + " or *.py) found");
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

CandidateFormat detect_format(const std::string& source) {
  const bool model_new = source.find("class ModelNew") != std::string::npos;
  const bool entry = source.find("leap_kernel") != std::string::npos;
  return model_new && !entry ? CandidateFormat::kernelbench : CandidateFormat::leap_abi;
}

std::optional<CandidateFormat> format_from(const std::string& name) {
  if (name == "kernelbench") return CandidateFormat::kernelbench;
  if (name == "leap") return CandidateFormat::leap_abi;
  return std::nullopt;
}

namespace {

std::set<std::string> task_names(const std::vector<Task>& tasks) {
  std::set<std::string> names;
  for (const auto& t : tasks) names.insert(t.name);
  return names;
}

}  // namespace

size_t drop_candidates_outside(std::vector<CandidateSource>& candidates, const std::vector<Task>& tasks) {
  const auto names = task_names(tasks);
  const size_t before = candidates.size();
  candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                  [&](const CandidateSource& c) { return !names.count(c.task); }),
                   candidates.end());
  return before - candidates.size();
}

void check_candidate_tasks(const std::vector<CandidateSource>& candidates, const std::vector<Task>& tasks) {
  const auto names = task_names(tasks);
  std::string unknown;
  for (const auto& c : candidates)
    if (!names.count(c.task)) unknown += "\n  " + c.origin + ": task '" + c.task + "'";
  if (!unknown.empty()) throw LeapError("candidates for tasks that are not in the suite:" + unknown);
}

}  // namespace leap
