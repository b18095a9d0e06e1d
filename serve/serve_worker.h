// A worker rank of `mpirun -np N leap serve`: evaluates the front door's jobs with its own compile
// farm and judges, and tells rank 0 it is alive every half second.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "common/config.h"
#include "common/loop_links.h"
#include "tasks/task.h"

namespace leap::serve {

// Returns when rank 0 says stop, or after a stop signal once it has been idle for a few seconds.
void run_serve_worker(const LeapConfig& cfg, Backend backend, const std::vector<Task>& tasks,
                      const std::string& evald_path, LoopLinks& links, std::shared_ptr<spdlog::logger> log);

}  // namespace leap::serve
