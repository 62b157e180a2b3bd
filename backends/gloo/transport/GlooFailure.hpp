#pragma once

// What a Gloo failure was, read from its message: Gloo reports failures as text only, so this is
// the one place that knows its wording (Debian's Gloo 5b14351; tests/unit/gloo_failure_test.cpp
// holds the messages it was written against). The SyncMesh's shared memory channels report theirs
// in the same words ("Read timeout [shared memory from rank 1] ...", "Connection closed by peer
// [shared memory to rank 1]"), so that every failure takes one path.

#include <string_view>

namespace c10d::inline v1 {

struct GlooFailure {
  // A wait ran out of time: "Timed out waiting 30000ms for recv operation to complete"
  // (unbound buffers), "Read timeout [addr]" / "Write timeout [addr]" (pairs in sync mode), or
  // "Application timeout caused pair closure" (another wait's timeout closed every pair).
  bool timedOut = false;
  // The peer's end went away: "Connection closed by peer [addr]", "Read error [addr]:
  // Connection reset by peer", "writev [addr]: Broken pipe".
  bool connectionLost = false;

  static GlooFailure of(std::string_view message) {
    auto has = [&](std::string_view word) { return message.find(word) != std::string_view::npos; };
    GlooFailure failure;
    failure.timedOut = has("Timed out") || has("timeout");
    failure.connectionLost = has("closed") || has("reset") || has("Broken pipe");
    return failure;
  }
};

}  // namespace c10d::inline v1
