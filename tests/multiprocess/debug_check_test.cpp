// C10D_DEBUG: collective checking at DETAIL and op logging at INFO, on forked Gloo ranks.

#include <gtest/gtest.h>
#include <stdlib.h>

#include "c10d/CollectiveCheck.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

// Sets C10D_DEBUG for the ranks forked while it lives.
class DebugLevelForRanks {
 public:
  explicit DebugLevelForRanks(const char* level) { ::setenv("C10D_DEBUG", level, 1); }
  ~DebugLevelForRanks() { ::unsetenv("C10D_DEBUG"); }
};

TEST(CollectiveCheckTest, DetailNamesTheRanksThatDifferAndHowOnEveryRank) {
  DebugLevelForRanks debug("DETAIL");
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 3}, [](test::RankEnv& env) {
    Tensor big = Tensor::zeros({1024}, ScalarType::Float32);
    Tensor small = Tensor::zeros({10}, ScalarType::Float32);
    test::expectThrows<InvalidArgument>(
        [&] {
          if (env.rank < 2) {
            env.pg.allreduce(big)->wait();
          } else {
            env.pg.broadcast(small, {.rootRank = 0})->wait();
          }
        },
        "allreduce against broadcast",
        {"ranks 0, 1: allreduce float32[1024] sum (#0); rank 2: broadcast float32[10] root 0 "
         "(#0)"});
    // A reduce op and a dtype that differ, each found before anything is sent.
    test::expectThrows<InvalidArgument>(
        [&] {
          env.pg.allreduce(small, {.reduceOp = env.rank == 1 ? ReduceOp::MAX : ReduceOp::SUM})
              ->wait();
        },
        "reduce ops",
        {"ranks 0, 2: allreduce float32[10] sum (#1); rank 1: allreduce float32[10] max (#1)"});
    Tensor ints = Tensor::zeros({10}, ScalarType::Int32);
    test::expectThrows<InvalidArgument>(
        [&] { env.pg.allreduce(env.rank == 0 ? ints : small)->wait(); }, "dtypes",
        {"rank 0: allreduce int32[10] sum (#2); ranks 1, 2: allreduce float32[10] sum (#2)"});
    // Matching calls still run, and their results are right.
    Tensor ones = Tensor::empty({4}, ScalarType::Float32);
    std::fill(ones.data<float>(), ones.data<float>() + 4, 1.0f);
    env.pg.allreduce(ones)->wait();
    test::checkEq(3.0f, ones.data<float>()[2], "allreduce after the mismatches");
    env.pg.barrier()->wait();
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(3, 0)) << test::report(outcomes);
}

TEST(CollectiveCheckTest, InfoLogsGroupCreationAndEachCollectivesDuration) {
  DebugLevelForRanks debug("INFO");
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 2}, [](test::RankEnv& env) {
    Tensor t = Tensor::zeros({4}, ScalarType::Float32);
    env.pg.allreduce(t)->wait();
    env.pg.broadcast(t, {.rootRank = 1})->wait();
    if (env.rank == 0) {
      env.pg.send(t, 1, 5)->wait();
    } else {
      env.pg.recv(t, 0, 5)->wait();
    }
  });
  ASSERT_EQ(test::exitCodes(outcomes), std::vector<int>(2, 0)) << test::report(outcomes);
  // Point-to-point ops are logged too, numbered apart from the collectives.
  EXPECT_NE(
      outcomes[0].output.find("send float32[4] to rank 1 tag 5 (point-to-point #0) completed in"),
      std::string::npos)
      << outcomes[0].output;
  EXPECT_NE(
      outcomes[1].output.find("recv float32[4] from rank 0 tag 5 (point-to-point #0) completed in"),
      std::string::npos)
      << outcomes[1].output;
  for (const auto& outcome : outcomes) {
    EXPECT_NE(outcome.output.find("of 2, backend 'gloo'"), std::string::npos) << outcome.output;
    EXPECT_NE(outcome.output.find("allreduce float32[4] sum (#0) completed in"), std::string::npos)
        << outcome.output;
    EXPECT_NE(outcome.output.find("broadcast float32[4] root 1 (#1) completed in"),
              std::string::npos)
        << outcome.output;
  }
}

TEST(CollectiveCheckTest, AnUnknownLevelIsAClearError) {
  DebugLevelForRanks debug("LOUD");
  EXPECT_THROW(debugLevel(config::Settings()), InvalidArgument);
}

}  // namespace
}  // namespace c10d::inline v1
