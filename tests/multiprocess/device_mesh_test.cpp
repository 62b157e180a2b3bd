// DeviceMesh (c10d/DeviceMesh.hpp) at 4 ranks as 2x2 and 4x1 and at 2 ranks as 1x2: each rank's
// coordinate, the members of each dimension's group (found by an allreduce over it), slices by
// name; and bad shapes and names on every rank.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "c10d/DeviceMesh.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Tensor.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

// The sum of 1 << rank over the group's members: which ranks it holds.
int64_t membersOf(ProcessGroup& group, int rank) {
  Tensor t = Tensor::empty({1}, ScalarType::Int64);
  t.data<int64_t>()[0] = int64_t{1} << rank;
  group.allreduce(t)->wait();
  return t.data<int64_t>()[0];
}

TEST(DeviceMesh, TwoByTwoAndFourByOneAtFourRanks) {
  auto outcomes = test::runRanks({.worldSize = 4}, [](test::RankEnv& env) {
    const int r = env.rank;
    DeviceMesh mesh = initDeviceMesh(env.pg, {2, 2}, {"dp", "tp"});
    test::checkEq(std::vector<int>{r / 2, r % 2}, mesh.coordinate(), "2x2 coordinate");
    test::checkEq(4, mesh.size(), "2x2 size");
    test::checkEq(r / 2, mesh.getLocalRank("dp"), "local rank along dp");
    test::checkEq(r % 2, mesh.getLocalRank(1), "local rank along tp");
    // dp: the ranks with the same tp coordinate ({0, 2}, {1, 3}); tp: the same row ({0, 1}, ...).
    test::checkEq(int64_t{(1 << (r % 2)) | (1 << (r % 2 + 2))}, membersOf(*mesh.getGroup("dp"), r),
                  "dp group's members");
    test::checkEq(int64_t{3 << (r / 2 * 2)}, membersOf(*mesh.getGroup("tp"), r),
                  "tp group's members");
    DeviceMesh tp = mesh.slice({"tp"});
    test::checkEq(std::vector<int>{r / 2 * 2, r / 2 * 2 + 1}, tp.ranks(), "mesh['tp'] ranks");
    test::check(tp.getGroup(0) == mesh.getGroup("tp"), "the slice keeps the dimension's group");
    DeviceMesh dp = mesh.slice({"dp"});
    test::checkEq(std::vector<int>{r % 2, r % 2 + 2}, dp.ranks(), "mesh['dp'] ranks");
    test::checkEq(std::vector<int>{0, 1, 2, 3}, mesh.slice({"dp", "tp"}).ranks(),
                  "both dimensions in order");

    DeviceMesh column = initDeviceMesh(env.pg, {4, 1}, {"a", "b"});
    test::checkEq(std::vector<int>{r, 0}, column.coordinate(), "4x1 coordinate");
    test::checkEq(int64_t{15}, membersOf(*column.getGroup("a"), r), "4x1: a holds all");
    test::checkEq(int64_t{1} << r, membersOf(*column.getGroup("b"), r), "4x1: b holds one");

    test::expectThrows<InvalidArgument>(
        [&] {
          mesh.slice({"tp", "dp"});
        },
        "names out of order", {"'dp' comes before 'tp'", "mesh's order"});
    test::expectThrows<InvalidArgument>([&] { mesh.getGroup("pp"); }, "an unknown name",
                                        {"no dimension named 'pp'", "'dp', 'tp'"});
    test::expectThrows<InvalidArgument>([&] { mesh.getLocalRank(2); }, "dimension 2 of 2",
                                        {"dimension 2 of a 2-dimensional mesh"});
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0, 0, 0})) << test::report(outcomes);
}

TEST(DeviceMesh, OneByTwoAtTwoRanksUnnamed) {
  auto outcomes = test::runRanks({.worldSize = 2}, [](test::RankEnv& env) {
    DeviceMesh mesh = initDeviceMesh(env.pg, {1, 2});
    test::checkEq(std::vector<int>{0, env.rank}, mesh.coordinate(), "1x2 coordinate");
    test::checkEq(int64_t{3}, membersOf(*mesh.getGroup(1), env.rank), "dimension 1 holds both");
    test::checkEq(int64_t{1} << env.rank, membersOf(*mesh.getGroup(0), env.rank),
                  "dimension 0 holds one");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0})) << test::report(outcomes);
}

TEST(DeviceMesh, BadShapesAndNamesFailOnEveryRank) {
  auto outcomes = test::runRanks({.worldSize = 2}, [](test::RankEnv& env) {
    test::expectThrows<InvalidArgument>([&] { initDeviceMesh(env.pg, {3}); }, "3 ranks of 2",
                                        {"mesh shape [3]", "(2)"});
    test::expectThrows<InvalidArgument>(
        [&] {
          initDeviceMesh(env.pg, {2, 0});
        },
        "a 0 dimension", {"has a dimension of 0"});
    test::expectThrows<InvalidArgument>(
        [&] {
          initDeviceMesh(env.pg, {1, 1});
        },
        "1 of 2 ranks", {"makes 1 ranks", "has 2"});
    test::expectThrows<InvalidArgument>(
        [&] {
          initDeviceMesh(env.pg, {2, 1}, {"x", "x"});
        },
        "a repeated name", {"'x' repeats"});
    test::expectThrows<InvalidArgument>(
        [&] {
          initDeviceMesh(env.pg, {2, 1}, {"x"});
        },
        "one name for two dimensions", {"1 names for 2"});
    // The group is still usable: no rank made a group the others did not.
    DeviceMesh mesh = initDeviceMesh(env.pg, {2}, {"dp"});
    test::checkEq(int64_t{3}, membersOf(*mesh.getGroup("dp"), env.rank), "a mesh after the errors");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0})) << test::report(outcomes);
}

}  // namespace
}  // namespace c10d::inline v1
