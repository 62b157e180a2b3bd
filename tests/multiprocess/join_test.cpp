// Uneven inputs: c10d::Join across forked ranks (Gloo and MPI), and DistributedSampler.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "c10d/training/DistributedSampler.hpp"
#include "c10d/training/Join.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

// Ranks with {2, 5, 3} steps of data: an allreduce of ones per step, shadowed with zeros.
void unevenSteps(test::RankEnv& env) {
  const int batches[] = {2, 5, 3};
  Join join(env.pg);
  Tensor ones = Tensor::empty({4}, ScalarType::Float32);
  std::vector<int> activeSeen;
  std::vector<float> sums;
  for (int b = 0; b < batches[env.rank]; ++b) {
    activeSeen.push_back(join.step());
    test::checkEq(activeSeen.back(), join.activeRanks(), "activeRanks() after a step");
    std::fill(ones.data<float>(), ones.data<float>() + 4, 1.0f);
    env.pg.allreduce(ones)->wait();
    sums.push_back(ones.data<float>()[3]);
  }
  int shadowed = 0;
  int last = join.finish([&] {
    Tensor zeros = Tensor::zeros({4}, ScalarType::Float32);
    env.pg.allreduce(zeros)->wait();
    ++shadowed;
  });
  // Steps 0-1: 3 ranks; step 2: ranks 1 and 2; steps 3-4: rank 1 alone.
  const std::vector<int> expectedActive = {3, 3, 2, 1, 1};
  test::checkEq(
      std::vector<int>(expectedActive.begin(), expectedActive.begin() + batches[env.rank]),
      activeSeen, "active ranks per step");
  // The sum counts exactly the ranks that had data: shadows contributed nothing.
  test::checkEq(
      std::vector<float>(expectedActive.begin(), expectedActive.begin() + batches[env.rank]), sums,
      "allreduce sums");
  test::checkEq(5 - batches[env.rank], shadowed, "shadowed steps");
  test::checkEq(1, last, "last rank to join");
  test::expectThrows<InvalidArgument>([&] { join.step(); }, "step after finish", {"after finish"});
  // The group is in step afterwards: one more collective pairs up on every rank.
  Tensor after = Tensor::zeros({1}, ScalarType::Int64);
  after.data<int64_t>()[0] = env.rank;
  env.pg.allreduce(after)->wait();
  test::checkEq<int64_t>(3, after.data<int64_t>()[0], "allreduce after the join");
}

TEST(JoinTest, RanksWithFewerBatchesShadowTheOthersGloo) {
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 3}, unevenSteps);
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(3, 0)) << test::report(outcomes);
}

TEST(JoinTest, NoRankWithDataReturnsMinusOne) {
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 2}, [](test::RankEnv& env) {
    Join join(env.pg);
    int shadowed = 0;
    test::checkEq(-1, join.finish([&] { ++shadowed; }), "last rank with no step at all");
    test::checkEq(0, shadowed, "shadowed steps");
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(2, 0)) << test::report(outcomes);
}

TEST(DistributedSamplerTest, EveryRankGetsTheSameCountAndTogetherTheyCoverTheData) {
  for (bool shuffle : {false, true}) {
    for (int64_t size : {0, 1, 10, 11, 12, 13}) {
      std::multiset<int64_t> seen;
      for (int rank = 0; rank < 4; ++rank) {
        DistributedSampler sampler(size, 4, rank, {.shuffle = shuffle, .seed = 3});
        std::vector<int64_t> mine = sampler.indices();
        EXPECT_EQ(static_cast<int64_t>(mine.size()), (size + 3) / 4) << size;
        EXPECT_EQ(sampler.numSamples(), static_cast<int64_t>(mine.size()));
        seen.insert(mine.begin(), mine.end());
      }
      // Every sample once, plus (padding) a few repeated to fill the last round.
      std::set<int64_t> distinct(seen.begin(), seen.end());
      EXPECT_EQ(static_cast<int64_t>(distinct.size()), size);
      EXPECT_EQ(static_cast<int64_t>(seen.size()), (size + 3) / 4 * 4);
      for (int64_t i : seen) EXPECT_TRUE(i >= 0 && i < size);
    }
  }
}

TEST(DistributedSamplerTest, DropLastTrimsInsteadOfRepeating) {
  std::set<int64_t> seen;
  for (int rank = 0; rank < 4; ++rank) {
    DistributedSampler sampler(13, 4, rank, {.shuffle = true, .seed = 1, .dropLast = true});
    EXPECT_EQ(sampler.numSamples(), 3);
    for (int64_t i : sampler.indices()) EXPECT_TRUE(seen.insert(i).second) << "repeated " << i;
  }
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_THROW(DistributedSampler(3, 4, 0, {.dropLast = true}), InvalidArgument);
}

TEST(DistributedSamplerTest, OrderDependsOnSeedAndEpochOnly) {
  DistributedSampler a(1000, 2, 1, {.seed = 42});
  DistributedSampler b(1000, 2, 1, {.seed = 42});
  EXPECT_EQ(a.indices(), b.indices());
  std::vector<int64_t> epoch0 = a.indices();
  a.setEpoch(1);
  EXPECT_NE(a.indices(), epoch0);
  b.setEpoch(1);
  EXPECT_EQ(a.indices(), b.indices());
  EXPECT_NE(DistributedSampler(1000, 2, 1, {.seed = 43}).indices(), epoch0);
  std::vector<int64_t> plain = DistributedSampler(10, 2, 1, {.shuffle = false}).indices();
  EXPECT_EQ(plain, (std::vector<int64_t>{1, 3, 5, 7, 9}));
}

TEST(DistributedSamplerTest, WindowsSplitEachSampleOnceAtAnyWorldSizeAcrossAReshard) {
  // An epoch of 100 samples in windows of 7 (the last one short), the members changing from 4
  // to 3 at window 5 and to 2 at window 11: each sample of the epoch is taken once.
  std::vector<DistributedSampler> replicas;
  for (int rank = 0; rank < 4; ++rank)
    replicas.emplace_back(100, 4, rank, DistributedSamplerOptions{});
  std::multiset<int64_t> seen;
  for (int64_t window = 0; window * 7 < 100; ++window) {
    const int size = window < 5 ? 4 : window < 11 ? 3 : 2;
    for (int rank = 0; rank < size; ++rank) {
      replicas[rank].reshard(size, rank);
      std::vector<int64_t> mine = replicas[rank].window(window * 7, 7);
      seen.insert(mine.begin(), mine.end());
    }
  }
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 100u);
  // The window follows the epoch's order: rank r of 2 takes positions r, r + 2, ...
  DistributedSampler plain(10, 2, 1, {.shuffle = false});
  EXPECT_EQ(plain.window(2, 5), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(plain.window(8, 5), (std::vector<int64_t>{9}));
  EXPECT_THROW(plain.window(-1, 3), InvalidArgument);
  EXPECT_THROW(plain.reshard(2, 2), InvalidArgument);
}

TEST(DistributedSamplerTest, BadArgumentsNameWhatIsWrong) {
  EXPECT_THROW(DistributedSampler(10, 0, 0), InvalidArgument);
  EXPECT_THROW(DistributedSampler(10, 2, 2), InvalidArgument);
  EXPECT_THROW(DistributedSampler(-1, 2, 0), InvalidArgument);
}

}  // namespace
}  // namespace c10d::inline v1
