#include "common/log.h"

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/basic_file_sink.h>
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

std::shared_ptr<spdlog::logger> run_logger(const std::string& name, const std::string& tag, const std::string& file,
                                           bool verbose_console) {
  if (auto existing = spdlog::get(name)) return existing;
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  console->set_level(verbose_console ? spdlog::level::info : spdlog::level::warn);
  auto to_file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file);
  auto logger = std::make_shared<spdlog::logger>(name, spdlog::sinks_init_list{console, to_file});
  logger->set_pattern("[%H:%M:%S.%e] [" + tag + "] [%^%l%$] %v");
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::info);  // a killed rank leaves a complete log
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace leap
