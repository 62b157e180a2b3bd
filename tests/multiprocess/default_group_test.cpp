// torch.distributed's module-level calls in C++ (c10d/DefaultGroup.hpp, c10d/Subgroups.hpp): the
// process's default group through initProcessGroup, before init, after destroy and after the
// program dropped it; new_subgroups and new_subgroups_by_enumeration at 2 and 4 ranks, and their
// bad input, on every rank.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "c10d/DefaultGroup.hpp"
#include "c10d/Init.hpp"
#include "c10d/Subgroups.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Tensor.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;

// A default group of worldSize ranks through initProcessGroup over tcp:// (rank 0 hosts the
// store on a port it picked and published in the runner's store).
std::shared_ptr<ProcessGroup> initDefault(test::RankEnv& env, const std::string& key) {
  if (env.rank == 0) env.store.setString(key, std::to_string(test::freeLoopbackPort()));
  const std::string port = toString(env.store.multiGet({key}, 30s)[0]);
  return initProcessGroup({.initMethod = "tcp://127.0.0.1:" + port,
                           .rank = env.rank,
                           .worldSize = env.size,
                           .timeout = 30s,
                           .groupName = "world"});
}

// The sum over ranks of what each contributed (rank + 1), allreduced on group.
int64_t sumOfRanks(ProcessGroup& group) {
  Tensor t = Tensor::empty({1}, ScalarType::Int64);
  t.data<int64_t>()[0] = group.globalRanks()[group.rank()] + 1;
  group.allreduce(t)->wait();
  return t.data<int64_t>()[0];
}

TEST(DefaultGroup, CallsWithoutOneSayWhyAndWhatToCall) {
  EXPECT_FALSE(isInitialized());
  test::expectThrows<StateError>([] { getRank(); }, "getRank before init",
                                 {"no default process group", "initProcessGroup() first"});
  test::expectThrows<StateError>([] { destroyProcessGroup(); }, "destroy before init",
                                 {"initProcessGroup() first"});
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("c10d_default_group_" + std::to_string(::getpid())))
                               .string();
  auto group = initProcessGroup(
      {.backend = "gloo", .initMethod = "file://" + path, .rank = 0, .worldSize = 1});
  EXPECT_TRUE(isInitialized());
  EXPECT_EQ(defaultGroup(), group);
  EXPECT_EQ(getRank(), 0);
  EXPECT_EQ(getWorldSize(), 1);
  EXPECT_EQ(getBackend(), "gloo");

  destroyProcessGroup();
  EXPECT_FALSE(isInitialized());
  test::expectThrows<StateError>([] { getWorldSize(); }, "getWorldSize after destroy",
                                 {"destroyProcessGroup() ended it"});
  test::expectThrows<StateError>(
      [&] {
        Tensor t = Tensor::empty({1}, ScalarType::Float32);
        group->allreduce(t)->wait();
      },
      "an op on the destroyed default group");
  test::expectThrows<StateError>([] { destroyProcessGroup(); }, "destroy twice",
                                 {"destroyProcessGroup() ended it"});

  // A new one replaces it; a program that drops its group has no default any more.
  std::filesystem::remove(path);
  group = initProcessGroup({.initMethod = "file://" + path, .rank = 0, .worldSize = 1});
  EXPECT_EQ(getRank(), 0);
  group.reset();
  EXPECT_FALSE(isInitialized());
  test::expectThrows<StateError>([] { getBackend(); }, "getBackend after the program dropped it",
                                 {"no longer holds"});
  std::filesystem::remove(path);
  EXPECT_EQ(test::failureCount(), 0);
}

void everyRankSeesTheDefault(int worldSize) {
  auto outcomes = test::runRanks({.worldSize = worldSize}, [](test::RankEnv& env) {
    auto group = initDefault(env, "default-port");
    test::checkEq(env.rank, getRank(), "getRank()");
    test::checkEq(env.size, getWorldSize(), "getWorldSize()");
    test::checkEq(int64_t{env.size} * (env.size + 1) / 2, sumOfRanks(*defaultGroup()),
                  "allreduce on defaultGroup()");
    defaultGroup()->barrier()->wait();
    destroyProcessGroup();
    test::check(!isInitialized(), "isInitialized() after destroyProcessGroup()");
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(worldSize, 0)) << test::report(outcomes);
}

TEST(DefaultGroup, EveryRankSeesItsRankAndSizeAt2Ranks) {
  everyRankSeesTheDefault(2);
}
TEST(DefaultGroup, EveryRankSeesItsRankAndSizeAt4Ranks) {
  everyRankSeesTheDefault(4);
}

TEST(Subgroups, NewSubgroupsOfTwoAtFourRanks) {
  auto outcomes = test::runRanks({.worldSize = 4}, [](test::RankEnv& env) {
    Subgroups made = newSubgroups(env.pg, 2);
    test::checkEq(size_t{2}, made.all.size(), "subgroups made");
    if (!test::check(made.mine != nullptr, "this rank's subgroup")) return;
    test::checkEq(2, made.mine->size(), "its size");
    test::checkEq(env.rank % 2, made.mine->rank(), "rank in it");
    test::check(made.mine == made.all[env.rank / 2], "mine is all[rank / 2]");
    test::check(!made.all[1 - env.rank / 2]->isMember(), "the other is a non-member handle");
    // Ranks 0 and 1 sum 1 + 2; ranks 2 and 3 sum 3 + 4.
    test::checkEq(int64_t{env.rank < 2 ? 3 : 7}, sumOfRanks(*made.mine), "allreduce in it");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0, 0, 0})) << test::report(outcomes);
}

TEST(Subgroups, ByEnumerationLeavesUnlistedRanksWithout) {
  for (int worldSize : {2, 4}) {
    auto outcomes = test::runRanks({.worldSize = worldSize}, [](test::RankEnv& env) {
      // At 4 ranks: {3, 0} and {1}; rank 2 is in none. At 2: {1, 0}.
      std::vector<std::vector<int>> lists = {{env.size - 1, 0}};
      if (env.size == 4) lists.push_back({1});
      Subgroups made = newSubgroupsByEnumeration(env.pg, lists);
      test::checkEq(lists.size(), made.all.size(), "subgroups made");
      if (env.rank == 2) {
        test::check(made.mine == nullptr, "rank 2 is in no subgroup");
        return;
      }
      if (!test::check(made.mine != nullptr, "this rank's subgroup")) return;
      if (env.rank == 1 && env.size == 4) {
        test::checkEq(1, made.mine->size(), "rank 1 alone");
        test::checkEq(int64_t{2}, sumOfRanks(*made.mine), "allreduce alone");
        return;
      }
      // In list order: the last rank is rank 0 of the subgroup.
      test::checkEq(env.rank == 0 ? 1 : 0, made.mine->rank(), "rank in {last, 0}");
      test::checkEq(int64_t{env.size + 1}, sumOfRanks(*made.mine), "allreduce in it");
    });
    EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(worldSize, 0)) << test::report(outcomes);
  }
}

TEST(Subgroups, BadInputFailsOnEveryRankAndLeavesTheGroupUsable) {
  auto outcomes = test::runRanks({.worldSize = 2}, [](test::RankEnv& env) {
    test::expectThrows<InvalidArgument>([&] { newSubgroups(env.pg, 3); }, "a size of 3 at 2 ranks",
                                        {"group size 3 does not divide the 2 ranks"});
    test::expectThrows<InvalidArgument>([&] { newSubgroups(env.pg, 0); }, "a size of 0",
                                        {"group size 0"});
    test::expectThrows<InvalidArgument>(
        [&] {
          newSubgroupsByEnumeration(env.pg, {{0, 1}, {1}});
        },
        "rank 1 twice", {"rank 1 is in subgroup 0 [0, 1] and in subgroup 1 [1]"});
    test::expectThrows<InvalidArgument>(
        [&] {
          newSubgroupsByEnumeration(env.pg, {{0, 5}});
        },
        "rank 5 of 2", {"rank 5 of subgroup 0", "size 2"});
    test::expectThrows<InvalidArgument>(
        [&] {
          newSubgroupsByEnumeration(env.pg, {{0}, {}});
        },
        "an empty list", {"subgroup 1 has no ranks"});
    test::checkEq(int64_t{3}, sumOfRanks(env.pg), "the group after the errors");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0})) << test::report(outcomes);
}

}  // namespace
}  // namespace c10d::inline v1
