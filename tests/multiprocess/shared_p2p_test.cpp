// Point-to-point over shared memory (backends/gloo/p2p/SharedPointToPoint): a large receive, whose
// payload is copied from the sender's memory, does not hold up the rank's other sends and
// receives meanwhile (issue 32, part 3).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "c10d/ProcessGroup.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

// 128 MiB: its copy takes tens of milliseconds, many small round trips. A round in which fewer
// than kDuring round trips completed during the copy is run again, up to kRounds: held up, at
// most the one in flight gets through in any round, so the bound holds on a loaded host too.
constexpr int64_t kLargeFloats = 32 << 20;
constexpr int kRounds = 8, kDuring = 3;
constexpr int kLargeTag = 7, kPingTag = 1, kPongTag = 2;

TEST(SharedPointToPointTest, ALargeReceiveLeavesTheOtherOpsOfItsRankFree) {
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 3}, [](test::RankEnv& env) {
    ProcessGroup& pg = env.pg;
    std::string seen;  // each round's round trips during the copy, for the failure message
    for (int round = 0; round < kRounds; ++round) {
      const std::string suffix = std::to_string(round);
      if (env.rank == 2) {  // answers rank 0's pings until it sends -1
        Tensor word = Tensor::zeros({1}, ScalarType::Int64);
        for (;;) {
          pg.recv(word, 0, kPingTag)->wait();
          if (word.data<int64_t>()[0] < 0) break;
          pg.send(word, 0, kPongTag)->wait();
        }
      } else if (env.rank == 1) {  // sends the large message once rank 0's pings flow
        Tensor large = Tensor::empty({kLargeFloats}, ScalarType::Float32);
        float* values = large.data<float>();
        for (int64_t i = 0; i < kLargeFloats; ++i) values[i] = static_cast<float>(i % 1000);
        env.store.wait({"pinging" + suffix});
        std::shared_ptr<Work> sent = pg.send(large, 0, kLargeTag);
        env.store.setString("sent" + suffix, "1");  // its head is in rank 0's channel now
        sent->wait();
      } else {
        Tensor large = Tensor::zeros({kLargeFloats}, ScalarType::Float32);
        std::shared_ptr<Work> received = pg.recv(large, 1, kLargeTag);
        std::atomic<bool> sent{false}, done{false};
        std::thread watcher;  // started once "pinging" is set: the store's client is used by
                              // one thread at a time here
        std::thread receiver([&] {
          received->wait();
          done = true;
        });
        // Round trips completed after rank 1 had sent and before the large receive completed.
        int during = 0, total = 0;
        Tensor ping = Tensor::zeros({1}, ScalarType::Int64);
        while (!done) {
          ping.data<int64_t>()[0] = total;
          pg.send(ping, 2, kPingTag)->wait();
          pg.recv(ping, 2, kPongTag)->wait();
          if (++total == 1) {
            env.store.setString("pinging" + suffix, "1");
            watcher = std::thread([&] {
              env.store.wait({"sent" + suffix});
              sent = true;
            });
          }
          if (sent && !done) ++during;
        }
        ping.data<int64_t>()[0] = -1;
        pg.send(ping, 2, kPingTag)->wait();
        receiver.join();
        watcher.join();
        const float* values = large.data<float>();
        bool intact = true;
        for (int64_t i = 0; i < kLargeFloats; i += 4097)
          intact &= values[i] == static_cast<float>(i % 1000);
        intact &= values[kLargeFloats - 1] == static_cast<float>((kLargeFloats - 1) % 1000);
        test::check(intact, "round " + suffix + ": the large message arrived whole");
        seen +=
            (seen.empty() ? "" : ", ") + std::to_string(during) + " of " + std::to_string(total);
        env.store.setString("verdict" + suffix, during >= kDuring ? "pass" : "again");
      }
      if (env.store.getString("verdict" + suffix) == "pass") return;
    }
    test::check(env.rank != 0, "round trips went on during the large copy in no round of " +
                                   std::to_string(kRounds) + " (at least " +
                                   std::to_string(kDuring) + " needed): " + seen);
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(3, 0)) << test::report(outcomes);
}

// Two ranks each send the other a large message and wait for their send first: the verdict
// that completes a send comes once the receiver copied the payload, which its receive's own
// wait has not begun. Whoever makes progress copies for a receive that nobody runs yet.
TEST(SharedPointToPointTest, LargeExchangesCompleteWhicheverWaitComesFirst) {
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 2}, [](test::RankEnv& env) {
    constexpr int64_t kFloats = 8 << 20;  // 32 MiB
    const int peer = 1 - env.rank;
    for (int order = 0; order < 3; ++order) {
      Tensor out = Tensor::empty({kFloats}, ScalarType::Float32);
      Tensor in = Tensor::zeros({kFloats}, ScalarType::Float32);
      float* values = out.data<float>();
      for (int64_t i = 0; i < kFloats; ++i) values[i] = static_cast<float>(env.rank * 7 + i % 13);
      std::shared_ptr<Work> sent = env.pg.send(out, peer, order);
      std::shared_ptr<Work> received = env.pg.recv(in, peer, order);
      if (order == 0) {  // the send's wait first
        sent->wait();
        received->wait();
      } else if (order == 1) {  // the receive's wait first
        received->wait();
        sent->wait();
      } else {  // nobody waits for a while: the progress threads complete both
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!(sent->isCompleted() && received->isCompleted()) &&
               std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        test::check(sent->isCompleted() && received->isCompleted(),
                    "both completed without a wait within 30 s");
        sent->wait();
        received->wait();
      }
      const float* got = in.data<float>();
      bool intact = true;
      for (int64_t i = 0; i < kFloats; i += 1009)
        intact &= got[i] == static_cast<float>(peer * 7 + i % 13);
      test::check(intact, "order " + std::to_string(order) + ": the peer's message arrived whole");
    }
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(2, 0)) << test::report(outcomes);
}

}  // namespace
}  // namespace c10d::inline v1
