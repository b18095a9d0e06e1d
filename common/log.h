// One spdlog logger per role, the rank in its pattern, level from SPDLOG_LEVEL.
#pragma once
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace leap {

// Creates (or returns) the logger for `role`; rank < 0 means "not an MPI rank".
std::shared_ptr<spdlog::logger> role_logger(const std::string& role, int rank = -1);

// A rank's logger in a run: everything to `file`, warnings and errors (everything on rank 0)
// to stderr. `name` must be unique in the process.
std::shared_ptr<spdlog::logger> run_logger(const std::string& name, const std::string& tag, const std::string& file,
                                           bool verbose_console);

}  // namespace leap
