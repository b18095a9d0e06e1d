// Candidate sources for `leap eval`: a folder of source files or a JSONL file.
//   DIR/<task>.cpp, DIR/<task>.<label>.cpp, DIR/<task>/<label>.cpp  (.cu on the CUDA backend)
//   DIR/<task>.py, DIR/<task>.<label>.py, DIR/<task>/<label>.py  (KernelBench format, any backend)
//   FILE.jsonl: {"task": "...", "name": "...", "source": "...", "format": "leap" | "kernelbench"}
//   per line ("name" optional; "format" optional: detected, see candidate_format)
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tasks/task.h"

namespace leap {

struct CandidateSource {
  std::string task;
  std::string name;
  std::string source;
  std::string origin;  // file (and line) it came from
  CandidateFormat format = CandidateFormat::leap_abi;
};

// A source's format when none is stated: KernelBench's when it defines `class ModelNew` and
// does not export leap_kernel, leap's otherwise.
CandidateFormat detect_format(const std::string& source);
// "kernelbench" / "leap" (the JSONL and service names); nullopt for anything else.
std::optional<CandidateFormat> format_from(const std::string& name);

// Throws LeapError naming the file (and line) for unreadable or malformed input.
std::vector<CandidateSource> load_candidates(const std::string& path, Backend backend);

// Throws LeapError listing candidates whose task is not among `tasks`.
void check_candidate_tasks(const std::vector<CandidateSource>& candidates, const std::vector<Task>& tasks);
// Removes the candidates for tasks outside `tasks`; returns how many it removed.
size_t drop_candidates_outside(std::vector<CandidateSource>& candidates, const std::vector<Task>& tasks);

}  // namespace leap
