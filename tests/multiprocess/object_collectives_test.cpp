// Object collectives in C++ (c10d/ObjectCollectives.hpp) at 2 and 4 ranks: nested std
// containers and a struct of one's own, every rank's different, empty and 1 MiB objects; and what
// happens when a rank passes another type, src passes the wrong number of objects, or a peer
// announces a size it cannot have.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "c10d/ObjectCollectives.hpp"
#include "c10d/core/Tensor.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

struct Step {
  std::string name;
  std::vector<double> losses;
  std::map<std::string, int> counts;
  bool operator==(const Step&) const = default;
  MSGPACK_DEFINE(name, losses, counts);
};

// What rank r contributes: different per rank, rank 1's with an empty vector and map.
Step stepOf(int r) {
  Step s{"rank" + std::to_string(r), {}, {}};
  for (int i = 0; i < (r == 1 ? 0 : r + 2); ++i) {
    s.losses.push_back(0.5 * i + r);
    s.counts["k" + std::to_string(i)] = i * r;
  }
  return s;
}

using Nested = std::map<std::string, std::vector<std::pair<int, std::string>>>;

Nested nestedOf(int r) {
  return {{"a", {{r, "x"}, {r + 1, std::string(r * 3, 'y')}}}, {"rank", {{r, ""}}}};
}

void allOps(int worldSize) {
  auto outcomes = test::runRanks({.worldSize = worldSize}, [](test::RankEnv& env) {
    const int n = env.size;
    std::vector<Step> steps = allGatherObject(env.pg, stepOf(env.rank));
    test::checkEq(size_t(n), steps.size(), "all_gather_object: one per rank");
    for (int r = 0; r < n && r < int(steps.size()); ++r) {
      test::check(steps[r] == stepOf(r), "all_gather_object: rank " + std::to_string(r) + "'s");
    }
    // Empty and 1 MiB strings side by side.
    std::string mine = env.rank == 0 ? std::string() : std::string(1 << 20, char('a' + env.rank));
    std::vector<std::string> strings = allGatherObject(env.pg, mine);
    for (int r = 0; r < n; ++r) {
      test::checkEq(r == 0 ? size_t{0} : size_t{1} << 20, strings[r].size(), "string sizes");
    }

    const int src = n - 1;
    std::vector<Nested> list;
    if (env.rank == src)
      list = {nestedOf(7), nestedOf(8), {}};
    else
      list = {nestedOf(env.rank)};  // replaced, and resized to src's length
    broadcastObjectList(env.pg, list, src);
    test::checkEq(size_t{3}, list.size(), "broadcast_object_list: src's length");
    test::check(
        list.size() == 3 && list[0] == nestedOf(7) && list[1] == nestedOf(8) && list[2].empty(),
        "broadcast_object_list: src's objects");

    std::optional<std::vector<Nested>> gathered = gatherObject(env.pg, nestedOf(env.rank), 1);
    test::checkEq(env.rank == 1, gathered.has_value(), "gather_object: only dst gets them");
    if (gathered) {
      for (int r = 0; r < n; ++r) test::check((*gathered)[r] == nestedOf(r), "gathered object");
    }

    std::vector<Step> inputs;
    if (env.rank == 0) {
      for (int r = 0; r < n; ++r) inputs.push_back(stepOf(10 + r));
    }
    test::check(scatterObjectList(env.pg, inputs, 0) == stepOf(10 + env.rank),
                "scatter_object_list: this rank's object");

    // A ring of send_object_list / recv_object_list.
    const int right = (env.rank + 1) % n, left = (env.rank + n - 1) % n;
    std::vector<Step> received;
    if (env.rank % 2 == 0) {
      sendObjectList(env.pg, std::vector<Step>{stepOf(env.rank), stepOf(20)}, right);
      recvObjectList(env.pg, received, left);
    } else {
      recvObjectList(env.pg, received, left);
      sendObjectList(env.pg, std::vector<Step>{stepOf(env.rank), stepOf(20)}, right);
    }
    test::check(received == std::vector<Step>{stepOf(left), stepOf(20)},
                "recv_object_list: the left neighbour's list");
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(worldSize, 0)) << test::report(outcomes);
}

TEST(ObjectCollectives, EveryOpAt2Ranks) {
  allOps(2);
}
TEST(ObjectCollectives, EveryOpAt4Ranks) {
  allOps(4);
}

TEST(ObjectCollectives, DisagreementsAndLiesNameTheRank) {
  auto outcomes = test::runRanks({.worldSize = 2}, [](test::RankEnv& env) {
    // Rank 1 passes a string where rank 0 passes a Step: each rank fails on the other's bytes.
    test::expectThrows<Error>(
        [&] {
          if (env.rank == 0)
            allGatherObject(env.pg, stepOf(0));
          else
            allGatherObject(env.pg, std::string("not a step"));
        },
        "all_gather_object of different types",
        {"all_gather_object: the", env.rank == 0 ? "from rank 1" : "from rank 0",
         "every rank must pass the same type"});
    // src passes one object for two ranks: every rank fails, none waits.
    test::expectThrows<InvalidArgument>(
        [&] {
          scatterObjectList(env.pg, env.rank == 0 ? std::vector<int>{1} : std::vector<int>{}, 0);
        },
        "scatter_object_list with one object for two ranks",
        {"rank 0 (src) passed", "for a group of 2 ranks"});
    // A dst out of range, with nothing to gather (no gather runs to refuse it): every rank.
    test::expectThrows<InvalidArgument>([&] { gatherBytes(env.pg, std::string(), 5); },
                                        "gather of empty bytes to dst 5",
                                        {"gather_object: dst 5 out of range [0, 2)"});
    // A peer that announces a negative size.
    if (env.rank == 0) {
      Tensor size = Tensor::empty({1}, ScalarType::Int64);
      size.data<int64_t>()[0] = -5;
      env.pg.send(size, 1)->wait();
    } else {
      std::vector<int> out;
      test::expectThrows<Error>([&] { recvObjectList(env.pg, out, 0); }, "a list whose size is -5",
                                {"rank 0 announced -5 bytes"});
    }
    // The group still works.
    std::vector<int> both = allGatherObject(env.pg, env.rank * 10);
    test::check(both == std::vector<int>{0, 10}, "all_gather_object after the errors");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0})) << test::report(outcomes);
}

}  // namespace
}  // namespace c10d::inline v1
