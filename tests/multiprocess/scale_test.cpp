// What a job's size costs each rank, counted rather than timed: store requests for a group's
// set-up (through a CountingStore), and the threads and descriptors a process holds as it joins
// more groups. Ranks are processes on this host, where shared memory carries every pair.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "store/CountingStore.hpp"
#include "store/PrefixStore.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

// The most requests any rank made: for the world group's set-up (to its first barrier's end),
// and for one subgroup made by split and used once.
struct Requests {
  int64_t init = -1;
  int64_t subgroup = -1;
};

// Runs size ranks that make a group over a CountingStore and a subgroup of half of them; rank 0
// prints the largest counts ("requests <init> <subgroup>"), read back here.
Requests countRequests(int size) {
  auto outcomes = test::runRanks(
      {.backend = "gloo", .worldSize = size, .deadline = std::chrono::seconds(150)},
      [](test::RankEnv& env) {
        std::shared_ptr<Store> job(&env.store, [](Store*) {});  // the runner's, not ours
        auto counting =
            std::make_shared<CountingStore>(std::make_shared<PrefixStore>("scale", job));
        ProcessGroup group(counting, env.rank, env.size, ProcessGroupOptions{.backend = "gloo"});
        group.barrier()->wait();
        const int64_t init = counting->counts().totalRequests();
        auto half = group.split(env.rank % 2, env.rank);
        Tensor one = Tensor::zeros({1}, ScalarType::Float32);
        one.data<float>()[0] = 1;
        half->allreduce(one)->wait();
        test::checkEq(static_cast<float>(env.size / 2), one.data<float>()[0], "the half's sum");
        const int64_t subgroup = counting->counts().totalRequests() - init;
        // Every rank's counts, in the runner's store (not counted), to rank 0.
        env.store.setString("scale/counts/" + std::to_string(env.rank),
                            std::to_string(init) + " " + std::to_string(subgroup));
        if (env.rank != 0) return;
        int64_t mostInit = 0, mostSubgroup = 0;
        for (int r = 0; r < env.size; ++r) {
          std::istringstream words(env.store.getString("scale/counts/" + std::to_string(r)));
          int64_t i = 0, s = 0;
          words >> i >> s;
          mostInit = std::max(mostInit, i);
          mostSubgroup = std::max(mostSubgroup, s);
        }
        std::printf("requests %lld %lld\n", static_cast<long long>(mostInit),
                    static_cast<long long>(mostSubgroup));
        std::fflush(stdout);
      });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(size, 0)) << test::report(outcomes);
  Requests requests;
  const std::string& output = outcomes.at(0).output;
  const size_t at = output.find("requests ");
  if (at != std::string::npos) {
    std::istringstream(output.substr(at + 9)) >> requests.init >> requests.subgroup;
  }
  return requests;
}

// A rendezvous that got or waited for each peer's key would make about twice as many requests
// at 32 ranks as at 8, and 16 times as many at 128.
TEST(ScaleTest, StoreRequestsPerRankDoNotGrowWithTheWorld) {
  const Requests at8 = countRequests(8);
  ASSERT_GT(at8.init, 0);
  ASSERT_GT(at8.subgroup, 0);
  for (int size : {32, 128}) {
    const Requests requests = countRequests(size);
    EXPECT_EQ(requests.init, at8.init)
        << "store requests for the world group's set-up at " << size << " ranks, against 8";
    EXPECT_EQ(requests.subgroup, at8.subgroup)
        << "store requests for a subgroup at " << size << " ranks, against 8";
  }
}

// Groups share the process's threads (op workers, Gloo's device) and, on one host, need no
// socket: twenty more groups leave the counts where the first group put them.
TEST(ScaleTest, TwentyGroupsAddNoThreadAndNoDescriptor) {
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 4}, [](test::RankEnv& env) {
    Tensor one = Tensor::zeros({1}, ScalarType::Float32);
    auto first = env.pg.split(env.rank % 2, env.rank);
    first->allreduce(one)->wait();
    const size_t threads = test::procEntries("/proc/self/task");
    const size_t descriptors = test::procEntries("/proc/self/fd");
    std::vector<std::shared_ptr<ProcessGroup>> groups;
    for (int i = 0; i < 20; ++i) {
      groups.push_back(env.pg.split(i % 2 == 0 ? env.rank % 2 : env.rank / 2, env.rank));
      groups.back()->allreduce(one)->wait();
    }
    // One more op worker may start while another runs an op nobody waited for in time (its
    // caller descheduled on a loaded machine); a thread per group would be twenty.
    test::check(
        test::procEntries("/proc/self/task") <= threads + 1,
        detail::concat("threads after 20 more groups: ", test::procEntries("/proc/self/task"),
                       ", after the first: ", threads));
    test::checkEq(descriptors, test::procEntries("/proc/self/fd"),
                  "descriptors after 20 more groups");
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(4, 0)) << test::report(outcomes);
}

}  // namespace
}  // namespace c10d::inline v1
