// Candidate sources for `leap eval`: a folder of source files or a JSONL file.
//   DIR/<task>.cpp, DIR/<task>.<label>.cpp, DIR/<task>/<label>.cpp  (.cu on the CUDA backend)
//   FILE.jsonl: {"task": "...", "name": "...", "source": "..."} per line ("name" optional)
#pragma once
#include <string>
#include <vector>

#include "tasks/task.h"

namespace leap {

struct CandidateSource {
  std::string task;
  std::string name;
  std::string source;
  std::string origin;  // file (and line) it came from
};

// Throws LeapError naming the file (and line) for unreadable or malformed input.
std::vector<CandidateSource> load_candidates(const std::string& path, Backend backend);

// Throws LeapError listing candidates whose task is not among `tasks`.
void check_candidate_tasks(const std::vector<CandidateSource>& candidates, const std::vector<Task>& tasks);
// Removes the candidates for tasks outside `tasks`; returns how many it removed.
size_t drop_candidates_outside(std::vector<CandidateSource>& candidates, const std::vector<Task>& tasks);

}  // namespace leap
