#pragma once

/// \file
/// The store keys through which c10drun records how each rank's processes ended and started.
///
/// Where c10drun tells the job's store how its ranks ended: the launcher writes it as it reaps a
/// rank, before it starts that rank again (--max-restarts). Survivors re-forming their group
/// (c10d/elastic/ElasticGroup.hpp) read it to tell a dead rank, which they stop waiting for at
/// once, from a slow one; a restarted process reads it to know it is one. Header-only: c10drun
/// includes it without the library's other headers.

#include <cstdint>
#include <string>

namespace c10d::inline v1::elastic {

/// A counter (Store::add): how many processes of this rank have ended so far. The process that
/// runs as the rank after n ends is its incarnation n; it is dead once the counter passes n.
/// \param globalRank the rank (an elastic id).
/// \return The key: "c10d/launcher/exits/<rank>".
inline std::string launcherExitsKey(int globalRank) {
  return "c10d/launcher/exits/" + std::to_string(globalRank);
}

/// A counter of every end recorded under launcherExitsKey, for the whole job: a launcher adds 1
/// here after it adds 1 to the rank's own counter (recordLauncherEnd). Survivors read this one
/// key to learn whether anyone ended since they last looked, and the ranks' own counters only
/// when it moved: one store request per look whatever the job's size.
/// \return The key: "c10d/launcher/ends".
inline std::string launcherEndsKey() {
  return "c10d/launcher/ends";
}

/// Records that the rank's current process ended, in the order readers rely on; returns the
/// incarnation that ended. Store is any type with add(key, delta) (c10drun's, the library's).
/// \tparam Store a store type whose add(key, delta) adds to a counter and returns its new value.
/// \param store the job's store.
/// \param globalRank the rank whose process ended.
/// \return The incarnation that ended (0 for the rank's first process).
template <typename Store>
int64_t recordLauncherEnd(Store& store, int globalRank) {
  const int64_t ended = store.add(launcherExitsKey(globalRank), 1) - 1;
  store.add(launcherEndsKey(), 1);
  return ended;
}

/// A counter: how many processes of this rank launchers have started. A launcher that finds it
/// above the exits counter (a node's launcher started again after the last one was lost, and its
/// ranks with it, unrecorded) records those ends first, so that its ranks start as restarts,
/// which join the members.
/// \param globalRank the rank (an elastic id).
/// \return The key: "c10d/launcher/starts/<rank>".
inline std::string launcherStartsKey(int globalRank) {
  return "c10d/launcher/starts/" + std::to_string(globalRank);
}

/// How incarnation n of the rank ended, in the launcher's words: "killed by signal SIGKILL at
/// 3.214 s" (since the launcher started).
/// \param globalRank the rank (an elastic id).
/// \param incarnation the incarnation, 0 for the rank's first process.
/// \return The key: "c10d/launcher/exit/<rank>/<incarnation>".
inline std::string launcherExitKey(int globalRank, int64_t incarnation) {
  return "c10d/launcher/exit/" + std::to_string(globalRank) + "/" + std::to_string(incarnation);
}

}  // namespace c10d::inline v1::elastic
