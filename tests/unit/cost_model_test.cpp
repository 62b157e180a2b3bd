// The cost model (backends/gloo/algorithms/CostModel.hpp): its costs follow the algorithms' step
// counts and bytes, and its choices move with the link as they should.

#include "backends/gloo/algorithms/CostModel.hpp"

#include <gtest/gtest.h>

namespace c10d::inline v1::cost {
namespace {

constexpr size_t kPiece = 256 * 1024;
// 1 Gbit/s with 50 us a message (a shaped link between hosts), and shared memory's order of
// magnitude (a copy at 5 GB/s, half a microsecond a message).
const LinkCost kGigabit{50.0, 8.0 / 1000.0};
const LinkCost kShared{0.5, 1.0 / 5000.0};

TEST(CostModel, CostsCountTheStepsAndBytesOfEachAlgorithm) {
  const LinkCost unitLatency{1.0, 0.0};
  // 4 members: 2 steps, 4 halving-doubling steps, 6 ring steps, each one latency.
  EXPECT_DOUBLE_EQ(cost(AllreduceAlgorithm::RecursiveDoubling, 4, 1024, unitLatency, kPiece), 2);
  EXPECT_DOUBLE_EQ(cost(AllreduceAlgorithm::HalvingDoubling, 4, 1024, unitLatency, kPiece), 4);
  EXPECT_DOUBLE_EQ(cost(AllreduceAlgorithm::Ring, 4, 1024, unitLatency, kPiece), 6);
  // 6 members: the two above the power of two fold in and get the result back (2 more steps).
  EXPECT_DOUBLE_EQ(cost(AllreduceAlgorithm::RecursiveDoubling, 6, 1024, unitLatency, kPiece), 4);
  EXPECT_DOUBLE_EQ(cost(AllreduceAlgorithm::HalvingDoubling, 6, 1024, unitLatency, kPiece), 6);
  EXPECT_DOUBLE_EQ(cost(AllreduceAlgorithm::Ring, 6, 1024, unitLatency, kPiece), 10);
  // Bytes alone: recursive doubling sends log2(p) whole buffers, the others 2(p-1)/p of one.
  const LinkCost unitBytes{0.0, 1.0};
  EXPECT_DOUBLE_EQ(cost(AllreduceAlgorithm::RecursiveDoubling, 8, 800, unitBytes, kPiece), 2400);
  EXPECT_DOUBLE_EQ(cost(AllreduceAlgorithm::HalvingDoubling, 8, 800, unitBytes, kPiece), 1400);
  EXPECT_DOUBLE_EQ(cost(AllreduceAlgorithm::Ring, 8, 800, unitBytes, kPiece), 1400);
  // A message over the piece size pays one latency per piece.
  EXPECT_DOUBLE_EQ(cost(AllreduceAlgorithm::RecursiveDoubling, 2, 3 * kPiece, unitLatency, kPiece),
                   3);
  EXPECT_EQ(cost(AllreduceAlgorithm::Ring, 1, 1024, kGigabit, kPiece), 0);
}

TEST(CostModel, ChoicesMoveWithTheLink) {
  // Small messages: fewest steps.
  EXPECT_EQ(cheapest<AllreduceAlgorithm>(4, 4, kGigabit, kPiece),
            AllreduceAlgorithm::RecursiveDoubling);
  EXPECT_EQ(cheapest<AllreduceAlgorithm>(4, 4, kShared, kPiece),
            AllreduceAlgorithm::RecursiveDoubling);
  // Mid sizes on a slow link: fewer bytes for the same messages' latency.
  EXPECT_EQ(cheapest<AllreduceAlgorithm>(4, 256 * 1024, kGigabit, kPiece),
            AllreduceAlgorithm::HalvingDoubling);
  EXPECT_EQ(cheapest<AllreduceAlgorithm>(4, 64 * 1024, kGigabit, kPiece),
            AllreduceAlgorithm::HalvingDoubling);
  // Where messages cost nothing but bytes, halving-doubling and the ring tie; the tie goes to the
  // fewer messages.
  EXPECT_EQ(cheapest<AllreduceAlgorithm>(8, 1 << 20, LinkCost{0.0, 1.0}, kPiece),
            AllreduceAlgorithm::HalvingDoubling);
  // A faster link moves the switch from recursive doubling to larger sizes.
  const LinkCost fast{10.0, 8.0 / 25000.0};
  EXPECT_EQ(cheapest<AllreduceAlgorithm>(4, 32 * 1024, kGigabit, kPiece),
            AllreduceAlgorithm::HalvingDoubling);
  EXPECT_EQ(cheapest<AllreduceAlgorithm>(4, 32 * 1024, fast, kPiece),
            AllreduceAlgorithm::RecursiveDoubling);
}

TEST(CostModel, NamesRoundTripAndChoicesReadAsText) {
  for (AllreduceAlgorithm algorithm :
       {AllreduceAlgorithm::RecursiveDoubling, AllreduceAlgorithm::HalvingDoubling,
        AllreduceAlgorithm::Ring}) {
    EXPECT_EQ(algorithmNamed<AllreduceAlgorithm>(algorithmName(algorithm)), algorithm);
  }
  EXPECT_EQ(algorithmNamed<AllreduceAlgorithm>("auto"), std::nullopt);
  EXPECT_EQ(algorithmNamed<AllreduceAlgorithm>(""), std::nullopt);
  for (BroadcastAlgorithm algorithm :
       {BroadcastAlgorithm::Binomial, BroadcastAlgorithm::ScatterAllgather,
        BroadcastAlgorithm::Pipeline}) {
    EXPECT_EQ(algorithmNamed<BroadcastAlgorithm>(algorithmName(algorithm)), algorithm);
  }
  for (AllgatherAlgorithm algorithm : {AllgatherAlgorithm::Bruck, AllgatherAlgorithm::Ring}) {
    EXPECT_EQ(algorithmNamed<AllgatherAlgorithm>(algorithmName(algorithm)), algorithm);
  }
  // Another kind's name is not this kind's.
  EXPECT_EQ(algorithmNamed<BroadcastAlgorithm>("ring"), std::nullopt);
  EXPECT_EQ(algorithmNamed<AllgatherAlgorithm>("pipeline"), std::nullopt);
  const std::string text = choices<AllreduceAlgorithm>(4, kGigabit, kPiece);
  EXPECT_EQ(text.rfind("recursive_doubling up to ", 0), 0u) << text;
  EXPECT_NE(text.find("halving_doubling"), std::string::npos) << text;
  const std::string broadcast = choices<BroadcastAlgorithm>(4, kGigabit, kPiece);
  EXPECT_EQ(broadcast.rfind("binomial up to ", 0), 0u) << broadcast;
  EXPECT_NE(broadcast.find("pipeline"), std::string::npos) << broadcast;
}

TEST(CostModel, BroadcastCostsCountStepsAndBytes) {
  const LinkCost unitLatency{1.0, 0.0};
  // 5 members: a binomial tree of 3 levels; a chain of 4 links; a scatter of 3 sends from the
  // root (to +4, +2, +1) and a ring of 4 steps.
  EXPECT_DOUBLE_EQ(cost(BroadcastAlgorithm::Binomial, 5, 1000, unitLatency, kPiece), 3);
  EXPECT_DOUBLE_EQ(cost(BroadcastAlgorithm::Pipeline, 5, 1000, unitLatency, kPiece), 4);
  EXPECT_DOUBLE_EQ(cost(BroadcastAlgorithm::ScatterAllgather, 5, 1000, unitLatency, kPiece), 7);
  // Bytes alone over 4 members: the tree's root sends the buffer twice; the scatter sends half
  // and a quarter of it from the root, and the ring three quarters; the chain the buffer once
  // and, while it fills, two more pieces.
  const LinkCost unitBytes{0.0, 1.0};
  EXPECT_DOUBLE_EQ(cost(BroadcastAlgorithm::Binomial, 4, 4000, unitBytes, kPiece), 8000);
  EXPECT_DOUBLE_EQ(cost(BroadcastAlgorithm::ScatterAllgather, 4, 4000, unitBytes, kPiece), 6000);
  EXPECT_DOUBLE_EQ(cost(BroadcastAlgorithm::Pipeline, 4, 4000, unitBytes, 1000), 6000);
  EXPECT_EQ(cost(BroadcastAlgorithm::Pipeline, 1, 4000, unitBytes, kPiece), 0);
}

TEST(CostModel, PipelinePiecesBalanceFillingAgainstLatency) {
  // sqrt(bytes * alpha / ((p - 2) * beta)): 1 MiB over 4 members at 1 Gbit/s and 50 us.
  const size_t piece = pipelinePiece(4, 1 << 20, kGigabit, kPiece);
  EXPECT_NEAR(static_cast<double>(piece), 57243.0, 1.0);
  // Clamped to [kMinPipelinePiece, pieceBytes], and pieceBytes where nothing is known or a
  // chain has no middle.
  EXPECT_EQ(pipelinePiece(4, 64, kGigabit, kPiece), kMinPipelinePiece);
  EXPECT_EQ(pipelinePiece(4, size_t{1} << 40, kGigabit, kPiece), kPiece);
  EXPECT_EQ(pipelinePiece(4, 1 << 20, LinkCost{}, kPiece), kPiece);
  EXPECT_EQ(pipelinePiece(2, 1 << 20, kGigabit, kPiece), kPiece);
}

TEST(CostModel, BroadcastChoicesMoveWithSizeAndMembers) {
  // Small: fewest steps. Large: the buffer across each link once.
  EXPECT_EQ(cheapest<BroadcastAlgorithm>(4, 4, kGigabit, kPiece), BroadcastAlgorithm::Binomial);
  EXPECT_EQ(cheapest<BroadcastAlgorithm>(4, 16 << 20, kGigabit, kPiece),
            BroadcastAlgorithm::Pipeline);
  // Two members: every algorithm sends the buffer once; the tie goes to the tree.
  EXPECT_EQ(cheapest<BroadcastAlgorithm>(2, 16 << 20, kGigabit, kPiece),
            BroadcastAlgorithm::Binomial);
  // Many members at a mid size: the model prices scattering below a chain's p-2 pieces to fill,
  // but the choice is never the scatter-allgather (measured slower where it was priced lower).
  EXPECT_LT(cost(BroadcastAlgorithm::ScatterAllgather, 64, 1 << 20, kGigabit, kPiece),
            cost(BroadcastAlgorithm::Pipeline, 64, 1 << 20, kGigabit, kPiece));
  for (size_t bytes = 4; bytes <= (size_t{64} << 20); bytes *= 4) {
    for (int members : {3, 4, 64, 1024}) {
      EXPECT_NE(cheapest<BroadcastAlgorithm>(members, bytes, kGigabit, kPiece),
                BroadcastAlgorithm::ScatterAllgather)
          << members << " members, " << bytes << " B";
    }
  }
}

TEST(CostModel, AllgatherCostsCountStepsAndBytes) {
  const LinkCost unitLatency{1.0, 0.0};
  EXPECT_DOUBLE_EQ(cost(AllgatherAlgorithm::Bruck, 5, 100, unitLatency, kPiece), 3);
  EXPECT_DOUBLE_EQ(cost(AllgatherAlgorithm::Ring, 5, 100, unitLatency, kPiece), 4);
  // The same p-1 blocks leave each member either way.
  const LinkCost unitBytes{0.0, 1.0};
  EXPECT_DOUBLE_EQ(cost(AllgatherAlgorithm::Bruck, 5, 100, unitBytes, kPiece), 400);
  EXPECT_DOUBLE_EQ(cost(AllgatherAlgorithm::Ring, 5, 100, unitBytes, kPiece), 400);
  EXPECT_EQ(cheapest<AllgatherAlgorithm>(8, 4, kGigabit, kPiece), AllgatherAlgorithm::Bruck);
  // Two members: one step either way; the tie goes to Bruck (listed first).
  EXPECT_EQ(cheapest<AllgatherAlgorithm>(2, 4, kGigabit, kPiece), AllgatherAlgorithm::Bruck);
}

}  // namespace
}  // namespace c10d::inline v1::cost
