// The run directory: runs/<name>/ with config.toml, metrics.jsonl (per step), outcomes.jsonl
// (every turn outcome), logs/rank-N.log and checkpoints/step-NNNNNN/. A checkpoint folder is
// written as step-NNNNNN.tmp and renamed once complete, so a stopped run never leaves a
// half-written checkpoint that looks whole.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace leap {

struct CheckpointRef {
  std::string dir;
  int step = 0;  // steps completed when it was written
};

std::string checkpoint_dir(const std::string& run_dir, int completed_steps);
// The complete checkpoint with the most steps, if any.
std::optional<CheckpointRef> latest_checkpoint(const std::string& run_dir);
// Appends one JSON line and flushes it to the file.
void append_jsonl(const std::string& path, const nlohmann::json& record);
// Appends the records as lines in one write.
void append_jsonl_lines(const std::string& path, const std::vector<nlohmann::json>& records);
// Every line as JSON; throws LeapError naming the file and line of a malformed one.
std::vector<nlohmann::json> read_jsonl(const std::string& path);
// Keeps only the lines whose "step" is below `step` (a resumed run recomputes the rest).
void truncate_jsonl(const std::string& path, int step);

}  // namespace leap
