#pragma once

// The signal named by C10D_FLIGHT_RECORDER_SIGNAL: the library installs a handler for it that
// dumps every flight recorder (c10d/FlightRecorder.hpp), and c10drun sends it to the surviving
// ranks when one dies. Header-only, because c10drun does not link the library.

#include <csignal>
#include <cstdlib>
#include <string_view>

namespace c10d::inline v0 {

// SIGUSR1 for "USR1" or "SIGUSR1", SIGUSR2 for "USR2" or "SIGUSR2"; 0 when the variable is
// unset or empty; -1 for any other value.
inline int flightRecorderSignalFromEnvironment() {
  const char* value = std::getenv("C10D_FLIGHT_RECORDER_SIGNAL");
  if (value == nullptr || *value == '\0') return 0;
  std::string_view name = value;
  if (name == "USR1" || name == "SIGUSR1") return SIGUSR1;
  if (name == "USR2" || name == "SIGUSR2") return SIGUSR2;
  return -1;
}

}  // namespace c10d::inline v0
