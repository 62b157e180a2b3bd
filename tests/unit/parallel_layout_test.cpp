// ParallelLayout: the arithmetic of data x tensor x pipeline ranks, and the groups it makes, on
// ranks as threads.

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "c10d/parallel/Layout.hpp"
#include "tests/support/ThreadRanks.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;

TEST(ParallelLayoutTest, CoordinatesAndRanksAreInverse) {
  for (ParallelSizes sizes : {ParallelSizes{2, 2, 2}, ParallelSizes{3, 1, 2},
                              ParallelSizes{1, 4, 1}, ParallelSizes{2, 3, 4}}) {
    const int world = sizes.data * sizes.tensor * sizes.pipeline;
    for (int rank = 0; rank < world; ++rank) {
      ParallelCoordinates at = ParallelLayout::coordinatesOf(rank, sizes);
      EXPECT_EQ(ParallelLayout::rankAt(at, sizes), rank);
      EXPECT_LT(at.tensor, sizes.tensor);
      EXPECT_LT(at.data, sizes.data);
      EXPECT_LT(at.pipeline, sizes.pipeline);
    }
  }
}

TEST(ParallelLayoutTest, TensorRanksAreConsecutiveThenDataThenPipeline) {
  ParallelSizes sizes{2, 2, 2};
  EXPECT_EQ(ParallelLayout::groupOf(5, "tensor", sizes), (std::vector<int>{4, 5}));
  EXPECT_EQ(ParallelLayout::groupOf(5, "data", sizes), (std::vector<int>{5, 7}));
  EXPECT_EQ(ParallelLayout::groupOf(5, "pipeline", sizes), (std::vector<int>{1, 5}));
  EXPECT_EQ(ParallelLayout::coordinatesOf(5, sizes), (ParallelCoordinates{0, 1, 1}));
  std::string map = ParallelLayout::describe(sizes);
  EXPECT_NE(map.find("rank 5: data 0 [5 7], tensor 1 [4 5], pipeline 1 [1 5]"), std::string::npos)
      << map;
  EXPECT_THROW(ParallelLayout::groupOf(0, "expert", sizes), InvalidArgument);
}

// Each group's ranks are the arithmetic's, in order, and a collective on it reaches exactly them.
TEST(ParallelLayoutTest, GroupsHoldTheirRanksAndRunCollectives) {
  const ParallelSizes sizes{2, 2, 2};
  auto errors = test::errorsOnThreadRanks(8, 30s, [&](ProcessGroup& world) {
    ParallelLayout layout(world, sizes);
    const int me = world.rank();
    EXPECT_EQ(layout.coordinates(), ParallelLayout::coordinatesOf(me, sizes));
    struct Axis {
      const char* name;
      ProcessGroup& group;
      int coordinate;
    };
    for (const Axis& axis : {Axis{"data", layout.data(), layout.coordinates().data},
                             Axis{"tensor", layout.tensor(), layout.coordinates().tensor},
                             Axis{"pipeline", layout.pipeline(), layout.coordinates().pipeline}}) {
      std::vector<int> ranks = ParallelLayout::groupOf(me, axis.name, sizes);
      EXPECT_EQ(axis.group.size(), 2) << axis.name;
      EXPECT_EQ(axis.group.rank(), axis.coordinate) << axis.name;
      EXPECT_EQ(axis.group.globalRanks(), ranks) << axis.name;
      auto value = Tensor::zeros({1}, ScalarType::Int64);
      value.data<int64_t>()[0] = me;
      axis.group.allreduce(value)->wait();
      EXPECT_EQ(value.data<int64_t>()[0], std::accumulate(ranks.begin(), ranks.end(), 0))
          << axis.name;
    }
  });
  for (int rank = 0; rank < 8; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

TEST(ParallelLayoutTest, SizesThatDoNotMakeTheWorldAreRefused) {
  auto errors = test::errorsOnThreadRanks(2, 30s, [](ProcessGroup& world) {
    ParallelLayout(world, ParallelSizes{2, 2, 1});
  });
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("data 2 x tensor 2 x pipeline 1 = 4 ranks, but the group has 2"),
              std::string::npos)
        << error;
  }
}

}  // namespace
}  // namespace c10d::inline v1
