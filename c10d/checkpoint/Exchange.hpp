#pragma once

// Private to c10d/checkpoint (not installed): how the ranks of a save or load tell each other
// what they hold and how each phase went. Every phase runs to its exchange on every rank, its
// error caught and carried in the exchange rather than thrown early, so one rank's bad input or
// failed write fails every rank (naming it) instead of leaving the others waiting for it.

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1::checkpoint::detail {

// Every rank's text, in rank order; group null: {mine}. A CPU collective of the group.
std::vector<std::string> allgatherText(ProcessGroup* group, const std::string& mine);

// Every rank's text, in rank order, on root only (empty elsewhere); group null: {mine}.
std::vector<std::string> gatherText(ProcessGroup* group, const std::string& mine, int root);

// What a phase left on one rank: empty, or an error's type and message.
struct Outcome {
  std::string type;  // "CheckpointError", "InvalidArgument", ... ; empty: it went well
  std::string message;
};

// Runs body, catching the error it throws into the returned outcome.
Outcome capture(const std::function<void()>& body);

// Ends a phase: every rank's payload, in rank order, once every rank's outcome is known; throws
// the first failed rank's error (this rank's own as it was) with its type, another rank's with
// "rank r: " before it.
std::vector<nlohmann::json> exchange(ProcessGroup* group, int rank, const Outcome& outcome,
                                     const nlohmann::json& payload);

}  // namespace c10d::inline v1::checkpoint::detail
