#pragma once

/// \file
/// The library's logging to stderr: LogLevel, the C10D_LOG_LEVEL threshold and the C10D_LOG
/// macro.

#include <string>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

/// A log line's severity, least severe first; Off, as the threshold, logs nothing.
enum class LogLevel : int { Debug = 0, Info = 1, Warning = 2, Error = 3, Off = 4 };

/// The threshold comes from C10D_LOG_LEVEL (DEBUG, INFO, WARNING, ERROR, OFF; default WARNING),
/// read once. Lines go to stderr, whole, so lines from threads and ranks do not interleave.
/// An invalid C10D_LOG_LEVEL is reported once on stderr and logging stays at WARNING (it never
/// throws here).
/// \return The threshold: the least severe level that is logged.
LogLevel logLevel();
/// \param level A line's severity (not Off).
/// \return Whether a line of that level is logged: level >= logLevel() and level is not Off.
bool shouldLog(LogLevel level);
/// Writes one line to stderr, whatever the threshold (callers ask shouldLog() first, as C10D_LOG
/// does): "[c10d W 12:34:56.789012 pid 4242] message", the time in UTC, in one write(2) whose
/// failure is ignored.
/// \param level The line's severity, shown as its initial (D, I, W, E).
/// \param message The text, without a trailing newline.
void logLine(LogLevel level, const std::string& message);

}  // namespace c10d::inline v1

/// Logs the streamed arguments as one line when level passes the threshold (shouldLog());
/// the message is not built otherwise: `C10D_LOG(Warning, "rank ", rank, " is slow")`.
/// \param level A LogLevel enumerator's name, without the enum: Debug, Info, Warning or Error.
/// \param ... The message's parts, streamed with operator<< one after another, no separator.
#define C10D_LOG(level, ...)                                                         \
  do {                                                                               \
    if (::c10d::shouldLog(::c10d::LogLevel::level))                                  \
      ::c10d::logLine(::c10d::LogLevel::level, ::c10d::detail::concat(__VA_ARGS__)); \
  } while (0)
