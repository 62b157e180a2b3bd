// GlooFailure::of against the messages Debian's Gloo (5b14351) writes, copied from its sources
// (gloo/transport/tcp/pair.cc, unbound_buffer.cc) and from this repository's fault tests, and
// against those of the SyncMesh's shared memory channels.
#include <gtest/gtest.h>

#include "backends/gloo/transport/GlooFailure.hpp"

namespace c10d::inline v1 {
namespace {

struct Sample {
  const char* message;
  bool timedOut;
  bool connectionLost;
};

const Sample kSamples[] = {
    {"[./gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 29999ms for recv operation "
     "to complete",
     true, false},
    {"[./gloo/transport/tcp/pair.cc:574] Read timeout [127.0.0.1]:54661", true, false},
    {"[./gloo/transport/tcp/pair.cc:590] Write timeout [127.0.0.1]:54661", true, false},
    {"Application timeout caused pair closure", true, false},
    {"[./gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:12197", false, true},
    {"[./gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:35202: Connection reset by peer",
     false, true},
    {"[./gloo/transport/tcp/pair.cc:395] writev [127.0.0.1]:35202: Broken pipe", false, true},
    {"[enforce fail at gloo/transport/tcp/pair.cc:510] op.preamble.length <= op.nbytes. 32 vs 16",
     false, false},
    // The SyncMesh's shared memory channels (SyncMesh::lost), in the same words.
    {"Read timeout [shared memory from rank 1] after 30000 ms", true, false},
    {"Write timeout [shared memory to rank 1] after 30000 ms", true, false},
    {"Connection closed by peer [shared memory from rank 1]", false, true},
    {"Connection closed by peer [shared memory to rank 2]: its process 4242 ended", false, true},
};

TEST(GlooFailureTest, EveryMessageIsReadAsWhatItSays) {
  for (const Sample& sample : kSamples) {
    GlooFailure failure = GlooFailure::of(sample.message);
    EXPECT_EQ(failure.timedOut, sample.timedOut) << sample.message;
    EXPECT_EQ(failure.connectionLost, sample.connectionLost) << sample.message;
  }
}

}  // namespace
}  // namespace c10d::inline v1
