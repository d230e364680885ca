// Logging: a thin facade over spdlog, so call sites do not depend on it.
// Lines go to stderr with a timestamp and level; --log-level sets the floor.
#pragma once

#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/status.h"

namespace hotrow::log {

// Sends log lines to stderr (stdout stays free for a command's output).
void Init();

// Writes out what is buffered (before a process ends without destructors).
inline void Flush() { spdlog::default_logger()->flush(); }

// One JSON object per line ({"time","level","message"}) instead of text
// (--log-format json).
void UseJson();

// "trace", "debug", "info", "warn", "error", "off"; false if unknown.
bool SetLevel(std::string_view level);

template <typename... Args>
void Debug(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::debug(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void Info(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::info(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void Warn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::warn(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void Error(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::error(fmt, std::forward<Args>(args)...);
}

// For a clean-up whose failure changes nothing the caller can do (a
// ROLLBACK after an error already being answered, an unlock): logged, never
// dropped silently.
inline void WarnIfFailed(const Status& s, std::string_view what) {
  if (!s.ok()) spdlog::warn("{}: {}", what, s.ToString());
}

}  // namespace hotrow::log
