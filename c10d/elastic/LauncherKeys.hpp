#pragma once

// Where c10drun tells the job's store how a rank ended: the launcher writes it as it reaps the
// rank, and survivors re-forming their group (c10d/elastic/ElasticGroup.hpp) read it to tell a
// dead rank, which they stop waiting for at once, from a slow one. Header-only: c10drun includes
// it without the library's other headers.

#include <string>

namespace c10d::inline v0::elastic {

// The value is the launcher's words: "killed by signal SIGKILL at 3.214 s" (since it started).
inline std::string launcherExitKey(int globalRank) {
  return "c10d/launcher/exit/" + std::to_string(globalRank);
}

}  // namespace c10d::inline v0::elastic
