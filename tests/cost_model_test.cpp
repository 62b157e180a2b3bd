// The allreduce cost model (backends/gloo/CostModel.hpp): its costs follow the algorithms' step
// counts and bytes, and its choices move with the link as they should.

#include "backends/gloo/CostModel.hpp"

#include <gtest/gtest.h>

namespace c10d::inline v0::cost {
namespace {

constexpr size_t kPiece = 256 * 1024;
// 1 Gbit/s with 50 us a message (a shaped link between hosts), and shared memory's order of
// magnitude (a copy at 5 GB/s, half a microsecond a message).
const LinkCost kGigabit{50.0, 8.0 / 1000.0};
const LinkCost kShared{0.5, 1.0 / 5000.0};

TEST(CostModel, CostsCountTheStepsAndBytesOfEachAlgorithm) {
  const LinkCost unitLatency{1.0, 0.0};
  // 4 members: 2 steps, 4 halving-doubling steps, 6 ring steps, each one latency.
  EXPECT_DOUBLE_EQ(
      allreduceCost(AllreduceAlgorithm::RecursiveDoubling, 4, 1024, unitLatency, kPiece), 2);
  EXPECT_DOUBLE_EQ(allreduceCost(AllreduceAlgorithm::HalvingDoubling, 4, 1024, unitLatency, kPiece),
                   4);
  EXPECT_DOUBLE_EQ(allreduceCost(AllreduceAlgorithm::Ring, 4, 1024, unitLatency, kPiece), 6);
  // 6 members: the two above the power of two fold in and get the result back (2 more steps).
  EXPECT_DOUBLE_EQ(
      allreduceCost(AllreduceAlgorithm::RecursiveDoubling, 6, 1024, unitLatency, kPiece), 4);
  EXPECT_DOUBLE_EQ(allreduceCost(AllreduceAlgorithm::HalvingDoubling, 6, 1024, unitLatency, kPiece),
                   6);
  EXPECT_DOUBLE_EQ(allreduceCost(AllreduceAlgorithm::Ring, 6, 1024, unitLatency, kPiece), 10);
  // Bytes alone: recursive doubling sends log2(p) whole buffers, the others 2(p-1)/p of one.
  const LinkCost unitBytes{0.0, 1.0};
  EXPECT_DOUBLE_EQ(allreduceCost(AllreduceAlgorithm::RecursiveDoubling, 8, 800, unitBytes, kPiece),
                   2400);
  EXPECT_DOUBLE_EQ(allreduceCost(AllreduceAlgorithm::HalvingDoubling, 8, 800, unitBytes, kPiece),
                   1400);
  EXPECT_DOUBLE_EQ(allreduceCost(AllreduceAlgorithm::Ring, 8, 800, unitBytes, kPiece), 1400);
  // A message over the piece size pays one latency per piece.
  EXPECT_DOUBLE_EQ(
      allreduceCost(AllreduceAlgorithm::RecursiveDoubling, 2, 3 * kPiece, unitLatency, kPiece), 3);
  EXPECT_EQ(allreduceCost(AllreduceAlgorithm::Ring, 1, 1024, kGigabit, kPiece), 0);
}

TEST(CostModel, ChoicesMoveWithTheLink) {
  // Small messages: fewest steps.
  EXPECT_EQ(cheapestAllreduce(4, 4, kGigabit, kPiece), AllreduceAlgorithm::RecursiveDoubling);
  EXPECT_EQ(cheapestAllreduce(4, 4, kShared, kPiece), AllreduceAlgorithm::RecursiveDoubling);
  // Mid sizes on a slow link: fewer bytes for the same messages' latency.
  EXPECT_EQ(cheapestAllreduce(4, 256 * 1024, kGigabit, kPiece),
            AllreduceAlgorithm::HalvingDoubling);
  EXPECT_EQ(cheapestAllreduce(4, 64 * 1024, kGigabit, kPiece), AllreduceAlgorithm::HalvingDoubling);
  // Where messages cost nothing but bytes, halving-doubling and the ring tie; the tie goes to the
  // fewer messages.
  EXPECT_EQ(cheapestAllreduce(8, 1 << 20, LinkCost{0.0, 1.0}, kPiece),
            AllreduceAlgorithm::HalvingDoubling);
  // A faster link moves the switch from recursive doubling to larger sizes.
  const LinkCost fast{10.0, 8.0 / 25000.0};
  EXPECT_EQ(cheapestAllreduce(4, 32 * 1024, kGigabit, kPiece), AllreduceAlgorithm::HalvingDoubling);
  EXPECT_EQ(cheapestAllreduce(4, 32 * 1024, fast, kPiece), AllreduceAlgorithm::RecursiveDoubling);
}

TEST(CostModel, NamesRoundTripAndChoicesReadAsText) {
  for (AllreduceAlgorithm algorithm :
       {AllreduceAlgorithm::RecursiveDoubling, AllreduceAlgorithm::HalvingDoubling,
        AllreduceAlgorithm::Ring}) {
    EXPECT_EQ(algorithmNamed(algorithmName(algorithm)), algorithm);
  }
  EXPECT_EQ(algorithmNamed("auto"), std::nullopt);
  EXPECT_EQ(algorithmNamed(""), std::nullopt);
  const std::string text = allreduceChoices(4, kGigabit, kPiece);
  EXPECT_EQ(text.rfind("recursive_doubling up to ", 0), 0u) << text;
  EXPECT_NE(text.find("halving_doubling"), std::string::npos) << text;
}

}  // namespace
}  // namespace c10d::inline v0::cost
