#pragma once

/// \file
/// flightRecorderSignalFromEnvironment: the signal that makes every flight recorder dump.
///
/// The signal named by C10D_FLIGHT_RECORDER_SIGNAL: the library installs a handler for it that
/// dumps every flight recorder (c10d/FlightRecorder.hpp), and c10drun sends it to the surviving
/// ranks when one dies. Header-only, because c10drun does not link the library.

#include <csignal>
#include <string>

#include "c10d/core/Config.hpp"

namespace c10d::inline v1 {

/// SIGUSR1 or SIGUSR2 as C10D_FLIGHT_RECORDER_SIGNAL names it; 0 when it is unset or empty.
/// Throws InvalidArgument for any other value.
/// \return SIGUSR1, SIGUSR2 or 0.
inline int flightRecorderSignalFromEnvironment() {
  std::string name = config::value("C10D_FLIGHT_RECORDER_SIGNAL");
  if (name.empty()) return 0;
  return name == "USR1" || name == "SIGUSR1" ? SIGUSR1 : SIGUSR2;
}

}  // namespace c10d::inline v1
