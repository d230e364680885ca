#include "ops/log.h"

#include <string>

#include <spdlog/sinks/stdout_sinks.h>

namespace hotrow::log {

void Init() {
  auto logger = spdlog::stderr_logger_mt("hotrow");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
}

bool SetLevel(std::string_view level) {
  auto l = spdlog::level::from_str(std::string(level));
  if (l == spdlog::level::off && level != "off") return false;
  spdlog::set_level(l);
  return true;
}

}  // namespace hotrow::log
