#pragma once

#include <string>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

enum class LogLevel : int { Debug = 0, Info = 1, Warning = 2, Error = 3, Off = 4 };

/// The threshold comes from C10D_LOG_LEVEL (DEBUG, INFO, WARNING, ERROR, OFF; default WARNING),
/// read once. Lines go to stderr, whole, so lines from threads and ranks do not interleave.
LogLevel logLevel();
bool shouldLog(LogLevel level);
void logLine(LogLevel level, const std::string& message);

}  // namespace c10d::inline v1

#define C10D_LOG(level, ...)                                                         \
  do {                                                                               \
    if (::c10d::shouldLog(::c10d::LogLevel::level))                                  \
      ::c10d::logLine(::c10d::LogLevel::level, ::c10d::detail::concat(__VA_ARGS__)); \
  } while (0)
