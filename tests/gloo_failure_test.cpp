// GlooFailure::of against the messages Debian's Gloo (5b14351) writes, copied from its sources
// (gloo/transport/tcp/pair.cc, unbound_buffer.cc) and from this repository's fault tests.
#include <gtest/gtest.h>

#include "c10d/backends/gloo/GlooFailure.hpp"

namespace c10d::inline v0 {
namespace {

TEST(GlooFailureTest, TimeoutsOfEveryKind) {
  for (const char* message :
       {"[./gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 29999ms for recv "
        "operation to complete",
        "[./gloo/transport/tcp/pair.cc:574] Read timeout [127.0.0.1]:54661",
        "[./gloo/transport/tcp/pair.cc:590] Write timeout [127.0.0.1]:54661",
        "Application timeout caused pair closure"}) {
    GlooFailure failure = GlooFailure::of(message);
    EXPECT_TRUE(failure.timedOut) << message;
    EXPECT_FALSE(failure.connectionLost) << message;
  }
}

TEST(GlooFailureTest, LostConnectionsOfEveryKind) {
  for (const char* message :
       {"[./gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:12197",
        "[./gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:35202: Connection reset by "
        "peer",
        "[./gloo/transport/tcp/pair.cc:395] writev [127.0.0.1]:35202: Broken pipe"}) {
    GlooFailure failure = GlooFailure::of(message);
    EXPECT_TRUE(failure.connectionLost) << message;
    EXPECT_FALSE(failure.timedOut) << message;
  }
}

TEST(GlooFailureTest, OtherFailuresAreNeither) {
  GlooFailure failure = GlooFailure::of("[enforce fail at gloo/transport/tcp/pair.cc:510] "
                                        "op.preamble.length <= op.nbytes. 32 vs 16");
  EXPECT_FALSE(failure.timedOut);
  EXPECT_FALSE(failure.connectionLost);
}

}  // namespace
}  // namespace c10d::inline v0
