#include "c10d/core/Logging.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "c10d/core/Config.hpp"

namespace c10d::inline v1 {
namespace {

// Logging must not throw where it is called (destructors, threads): a bad C10D_LOG_LEVEL is
// said here once and logging stays at WARNING; the next process group's creation refuses it.
LogLevel readLevel() {
  std::string value;
  try {
    value = config::value("C10D_LOG_LEVEL");
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "[c10d] %s; logging at WARNING\n", e.what());
    return LogLevel::Warning;
  }
  if (value == "DEBUG") return LogLevel::Debug;
  if (value == "INFO") return LogLevel::Info;
  if (value == "ERROR") return LogLevel::Error;
  if (value == "OFF") return LogLevel::Off;
  return LogLevel::Warning;
}

const char* tag(LogLevel level) {
  switch (level) {
    case LogLevel::Debug:
      return "D";
    case LogLevel::Info:
      return "I";
    case LogLevel::Warning:
      return "W";
    default:
      return "E";
  }
}

}  // namespace

LogLevel logLevel() {
  static const LogLevel level = readLevel();
  return level;
}

bool shouldLog(LogLevel level) {
  return level >= logLevel() && level != LogLevel::Off;
}

void logLine(LogLevel level, const std::string& message) {
  using namespace std::chrono;
  auto now = system_clock::now();
  std::time_t seconds = system_clock::to_time_t(now);
  auto micros = duration_cast<microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char stamp[64];
  std::snprintf(stamp, sizeof(stamp), "%02d:%02d:%02d.%06ld", tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long>(micros));
  std::string line = std::string("[c10d ") + tag(level) + " " + stamp + " pid " +
                     std::to_string(::getpid()) + "] " + message + "\n";
  // One write() per line: stderr is unbuffered and write() of a small buffer is atomic enough
  // that concurrent lines do not interleave.
  [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace c10d::inline v1
