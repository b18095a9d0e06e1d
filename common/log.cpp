#include "common/log.h"

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace leap {

std::shared_ptr<spdlog::logger> role_logger(const std::string& role, int rank) {
  if (auto existing = spdlog::get(role)) return existing;
  auto logger = spdlog::stderr_color_mt(role);
  std::string tag = rank >= 0 ? role + ":" + std::to_string(rank) : role;
  logger->set_pattern("[%H:%M:%S.%e] [" + tag + "] [%^%l%$] %v");
  logger->set_level(spdlog::level::info);
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL=debug or SPDLOG_LEVEL=evald=debug
  return logger;
}

}  // namespace leap
