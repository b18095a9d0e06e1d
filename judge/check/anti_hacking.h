// Static reward-hacking checks on a compiled candidate, before it is ever loaded.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "common/outcome.h"

namespace leap {

// The first import that a kernel has no business calling (process creation, signals to
// other processes, network, dynamic loading, file creation or writing, vendor math libraries,
// LibTorch), or nullopt.
std::optional<std::string> forbidden_import(const std::vector<std::string>& imports);

// The library at `path` imports nothing forbidden; else false with `o` filled
// (cheat_detected(forbidden_import), or runtime_error for a library that cannot be read).
bool imports_allowed(const std::string& path, EvalOutcome& o);

}  // namespace leap
