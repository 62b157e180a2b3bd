// ElasticGroup across real processes: re-forming without loss leaks nothing, a SIGKILLed rank is
// dropped and the survivors' new group works, too few survivors is an error naming the lost id,
// and a rank that stalls past the join wait is left out and told so. (c10drun --elastic with
// real kills of launched ranks: tests/integration/elastic_train_test.sh.)

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "c10d/checkpoint/State.hpp"
#include "c10d/elastic/ElasticGroup.hpp"
#include "c10d/elastic/LauncherKeys.hpp"
#include "c10d/elastic/ShardCopies.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

using elastic::ElasticGroup;
using elastic::ElasticOptions;
using test::check;
using test::checkEq;

// Sum of every member's (rank + 1), through the group: checks that the group works and holds
// the members it says.
float sumOfRanks(ElasticGroup& elastic) {
  float value = static_cast<float>(elastic.rank() + 1);
  elastic.group().allreduce(Tensor::fromBlob(&value, ScalarType::Float32, {1}))->wait();
  return value;
}

// One step of 1-float gradients (every member adds 1 per member to weight when it commits).
// False when the program must reform: the step failed, or a restarted process asks to join.
bool trainStep(ElasticGroup& elastic, float& weight) {
  float gradient = 1.0f;
  bool ok = true;
  try {
    elastic.group().allreduce(Tensor::fromBlob(&gradient, ScalarType::Float32, {1}))->wait();
  } catch (const Error&) {
    ok = false;
  }
  if (!elastic.commit(ok)) return false;
  weight += gradient;
  return !elastic.joinsPending();
}

// Whether every member holds the same weight.
bool weightsAgree(ElasticGroup& elastic, float weight) {
  float low = weight, high = weight;
  elastic.group()
      .allreduce(Tensor::fromBlob(&low, ScalarType::Float32, {1}),
                 AllreduceOptions{.reduceOp = ReduceOp::MIN})
      ->wait();
  elastic.group()
      .allreduce(Tensor::fromBlob(&high, ScalarType::Float32, {1}),
                 AllreduceOptions{.reduceOp = ReduceOp::MAX})
      ->wait();
  return low == high;
}

ElasticOptions quick(int minSize = 1) {
  ElasticOptions options;
  options.group.backend = "gloo";
  options.group.timeout = std::chrono::seconds(20);
  options.minSize = minSize;
  // runRanks has no launcher to record deaths: the survivors wait this long for the dead.
  options.joinTimeout = std::chrono::milliseconds(1500);
  return options;
}

std::shared_ptr<Store> shared(Store& store) {
  return std::shared_ptr<Store>(&store, [](Store*) {});
}

TEST(Elastic, TwentyReformationsWithoutLossLeakNoThreadsOrDescriptors) {
  auto outcomes = test::runRanks({.worldSize = 3}, [](test::RankEnv& env) {
    ElasticGroup elastic(shared(env.store), env.rank, env.size, quick());
    checkEq(6.0f, sumOfRanks(elastic), "sum over members 0, 1, 2");
    elastic.reform();  // the first builds what every later one reuses (the logger, pools)
    const size_t fds = test::procEntries("/proc/self/fd"),
                 threads = test::procEntries("/proc/self/task");
    for (int i = 0; i < 20; ++i) {
      const elastic::Reformation r = elastic.reform();
      checkEq(size_t{0}, r.lost.size(), "ids lost");
      checkEq(std::vector<int>{0, 1, 2}, r.members, "members");
      checkEq(6.0f, sumOfRanks(elastic), "sum over members 0, 1, 2");
    }
    checkEq(uint64_t{21}, elastic.generation(), "generation");
    checkEq(fds, test::procEntries("/proc/self/fd"), "open descriptors after 20 reformations");
    // The process's op workers may hold one more (a second starts while one runs an op nobody
    // waited for in time, on a loaded machine); a leak would be a thread per reformation.
    check(test::procEntries("/proc/self/task") <= threads + 1,
          detail::concat("threads after 20 reformations: ", test::procEntries("/proc/self/task"),
                         ", before: ", threads));
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(3, 0)) << test::report(outcomes);
}

TEST(Elastic, SurvivorsOfASigkillReformAndCarryOnWithReplicatedState) {
  auto outcomes = test::runRanks({.worldSize = 4, .killedRanks = {2}}, [](test::RankEnv& env) {
    ElasticGroup elastic(shared(env.store), env.rank, env.size, quick());
    float weight = 1.0f;
    checkpoint::State state;
    state.add("weight", Tensor::fromBlob(&weight, ScalarType::Float32, {1}));
    check(elastic.commit(true), "the first step commits everywhere");
    if (env.rank == 2) ::raise(SIGKILL);
    int failures = 0;
    while (elastic.step() < 5) {
      bool ok = true;
      float gradient = 1.0f;
      try {
        elastic.group().allreduce(Tensor::fromBlob(&gradient, ScalarType::Float32, {1}))->wait();
      } catch (const Error&) {
        ok = false;
      }
      if (elastic.commit(ok)) {
        weight += gradient;
        continue;
      }
      ++failures;
      const elastic::Reformation r = elastic.reform(&state);
      checkEq(std::vector<int>{2}, r.lost, "ids lost");
      checkEq(std::vector<int>{0, 1, 3}, r.members, "members");
    }
    checkEq(1, failures, "failed commits");
    checkEq(3, elastic.size(), "size");
    checkEq(std::vector<int>{0, 1, 3}, elastic.members(), "members");
    // Steps 2 to 5 ran on 3 members: 1 + 4 * 3.
    checkEq(13.0f, weight, "weight after 1 + 4 steps of 3 members");
    checkEq(6.0f, sumOfRanks(elastic), "sum over members 0, 1, 2");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0, 128 + SIGKILL, 0}))
      << test::report(outcomes);
}

TEST(Elastic, FewerSurvivorsThanMinSizeIsAnErrorNamingTheLost) {
  auto outcomes = test::runRanks({.worldSize = 3, .killedRanks = {1}}, [](test::RankEnv& env) {
    ElasticGroup elastic(shared(env.store), env.rank, env.size, quick(/*minSize=*/3));
    if (env.rank == 1) ::raise(SIGKILL);
    check(!elastic.commit(true), "a commit with a dead rank fails");
    test::expectThrows<StateError>([&] { elastic.reform(); }, "reform below minSize",
                                   {"2 member(s) left in generation 1 (ids 0, 2; lost 1), fewer "
                                    "than ElasticOptions::minSize 3"});
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 128 + SIGKILL, 0}))
      << test::report(outcomes);
}

TEST(Elastic, ARankThatStallsPastTheJoinWaitIsLeftOutAndToldSo) {
  auto outcomes = test::runRanks({.worldSize = 3}, [](test::RankEnv& env) {
    ElasticGroup elastic(shared(env.store), env.rank, env.size, quick());
    if (env.rank == 2) {
      // Stalled (a stopped process, a cut link): it comes to re-form after the others went on.
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));
      test::expectThrows<StateError>([&] { elastic.reform(); }, "late reform",
                                     {"id 2 was left out of generation 1 (members 0, 1)"});
      test::expectThrows<StateError>([&] { elastic.group(); }, "group after", {"left out"});
      return;
    }
    const elastic::Reformation r = elastic.reform();
    checkEq(std::vector<int>{2}, r.lost, "ids lost");
    checkEq(3.0f, sumOfRanks(elastic), "sum over members 0, 1");
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(3, 0)) << test::report(outcomes);
}

TEST(Elastic, ARestartedProcessIsAdmittedAtAStepBoundaryAndHealed) {
  auto outcomes = test::runRanks({.worldSize = 3}, [](test::RankEnv& env) {
    float weight = 0.0f;
    checkpoint::State state;
    state.add("weight", Tensor::fromBlob(&weight, ScalarType::Float32, {1}));
    auto elastic = std::make_unique<ElasticGroup>(shared(env.store), env.rank, env.size, quick());
    checkEq(int64_t{0}, elastic->incarnation(), "a first process's incarnation");
    auto train = [&](int64_t until) {
      int reforms = 0;
      while (elastic->step() < until || elastic->size() < 3) {
        if (trainStep(*elastic, weight)) continue;
        elastic->reform(&state);
        ++reforms;
      }
      return reforms;
    };
    train(3);
    if (env.rank == 2) {
      // Its process ends (the group goes with it), its launcher records the end and starts a
      // new process, which knows nothing of the training.
      elastic.reset();
      elastic::recordLauncherEnd(env.store, 2);
      weight = -1.0f;
      elastic = std::make_unique<ElasticGroup>(shared(env.store), env.rank, env.size, quick());
      checkEq(int64_t{1}, elastic->incarnation(), "the restarted process's incarnation");
      test::expectThrows<StateError>([&] { elastic->group(); }, "group before join",
                                     {"call join() before using the group"});
      const elastic::Reformation r = elastic->join(&state);
      checkEq(std::vector<int>{2}, r.joined, "joined");
      checkEq(std::vector<int>{0, 1, 2}, r.members, "members");
      check(r.healed, "the newcomer received the state");
      check(weight >= 9.0f, "the newcomer's weight is the members' (at least 3 steps of 3)");
    } else {
      // One reform when the newcomer asked in time to be admitted by the one for the loss.
      check(train(10) >= 1, "a reform");
    }
    if (env.rank == 2) train(10);
    checkEq(3, elastic->size(), "size after the rejoin");
    check(elastic->generation() == 1 || elastic->generation() == 2,
          "generation: a shrink, then a growth, or both at once");
    check(weightsAgree(*elastic, weight), "weights equal on every member");
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(3, 0)) << test::report(outcomes);
}

// A member that dies after the survivors counted it in (it added itself to "arrived") but
// before it built the new group: the survivors' rendezvous waits for its keys, sees the
// launcher's record of the death in the generation's store, and they form the next one without it,
// long before the group's 60 s timeout would have ended the wait.
TEST(Elastic, AMemberThatDiesWhileTheNextGenerationIsBuiltIsLeftOutOfTheOneAfter) {
  auto outcomes = test::runRanks({.worldSize = 3, .killedRanks = {2}}, [](test::RankEnv& env) {
    ElasticOptions options = quick();
    options.group.timeout = std::chrono::seconds(60);
    ElasticGroup elastic(shared(env.store), env.rank, env.size, options);
    if (env.rank == 2) {
      // What reform does up to the agreement on members (the keys of agreeOnMembers), then the
      // end of the process as its launcher records it.
      const std::string g1 = "c10d/elastic/default/g1/";
      env.store.append(g1 + "arrived", toBytes(" 2"));
      env.store.wait({g1 + "members"});
      elastic::recordLauncherEnd(env.store, 2);
      ::raise(SIGKILL);
    }
    const auto start = std::chrono::steady_clock::now();
    const elastic::Reformation r = elastic.reform();
    check(std::chrono::steady_clock::now() - start < std::chrono::seconds(30),
          "reform ended by the death, not by the group's 60 s timeout");
    checkEq(uint64_t{2}, r.generation, "generation: 1 (with id 2) never formed, 2 did");
    checkEq(std::vector<int>{2}, r.lost, "ids lost");
    checkEq(std::vector<int>{0, 1}, r.members, "members");
    checkEq(3.0f, sumOfRanks(elastic), "sum over members 0, 1");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0, 128 + SIGKILL}))
      << test::report(outcomes);
}

// A kill during a rejoin: the member that heals the restarted process dies as it starts to send
// the state. The newcomer and the other member form the next generation without it, and the
// newcomer is healed from the other member.
TEST(Elastic, AHealerThatDiesDuringARejoinIsReplacedByAnotherMember) {
  auto outcomes = test::runRanks({.worldSize = 3, .killedRanks = {1}}, [](test::RankEnv& env) {
    float weight = 0.0f;
    checkpoint::State state;
    state.add("weight", Tensor::fromBlob(&weight, ScalarType::Float32, {1}));
    // Runs on the member that heals others, before it sends: id 1 dies there.
    state.beforeSave([&env] {
      if (env.rank != 1) return;
      elastic::recordLauncherEnd(env.store, 1);
      ::raise(SIGKILL);
    });
    auto elastic = std::make_unique<ElasticGroup>(shared(env.store), env.rank, env.size, quick());
    const std::vector<int> survivors{0, 2};
    auto train = [&](int64_t until) {
      while (elastic->step() < until || elastic->members() != survivors) {
        if (!trainStep(*elastic, weight)) elastic->reform(&state);
      }
    };
    for (int i = 0; i < 3; ++i) {
      float gradient = 1.0f;
      elastic->group().allreduce(Tensor::fromBlob(&gradient, ScalarType::Float32, {1}))->wait();
      check(elastic->commit(true), "a step of all three");
      weight += gradient;
    }
    // The restarted process is id 0's, whose process hosts runRanks' store and so stays.
    if (env.rank == 0) {
      elastic.reset();
      elastic::recordLauncherEnd(env.store, 0);
      weight = -1.0f;
      elastic = std::make_unique<ElasticGroup>(shared(env.store), env.rank, env.size, quick());
      const elastic::Reformation r = elastic->join(&state);
      checkEq(survivors, r.members, "members after the healer died");
      checkEq(std::vector<int>{0}, r.joined, "joined");
      check(r.healed, "the newcomer received the state");
      check(weight >= 9.0f, "the newcomer's weight is the members' (at least 3 steps of 3)");
    }
    train(6);
    check(weightsAgree(*elastic, weight), "weights equal on both members");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 128 + SIGKILL, 0}))
      << test::report(outcomes);
}

// Two tensors cut as ZeroOptimizer cuts its flat parameters (ceil(n / size) each, from the
// front): "w" of 10 elements and "small" of 4, which a rank whose cut is empty does not hold at
// all (as ZeroOptimizer adds no state for a parameter its shard misses: at 3 ranks, rank 2).
// After step s, element i holds i + s.
struct ShardedTensor {
  std::vector<float> w, small;
  checkpoint::State state;
  ShardedTensor(int rank, int size, int64_t step) {
    add("w", w, 10, rank, size, step);
    add("small", small, 4, rank, size, step);
  }
  void add(const std::string& name, std::vector<float>& values, int64_t n, int rank, int size,
           int64_t step) {
    const int64_t part = (n + size - 1) / size;
    const int64_t begin = std::min<int64_t>(n, rank * part);
    const int64_t count = std::min<int64_t>(n, begin + part) - begin;
    if (count == 0) return;
    values.resize(static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k) values[k] = static_cast<float>(begin + k + step);
    state.addSlice(name, Tensor::fromBlob(values.data(), ScalarType::Float32, {count}), {n},
                   checkpoint::Slice::flat(begin, count));
  }
  void zero() {
    std::fill(w.begin(), w.end(), 0.0f);
    std::fill(small.begin(), small.end(), 0.0f);
  }
  void step() {
    for (float& v : w) v += 1.0f;
    for (float& v : small) v += 1.0f;
  }
  bool holds(int64_t step) const {
    for (const checkpoint::StateTensor& t : state.tensors()) {
      const int64_t begin = t.slice.offsets[0];
      const float* values = t.local.data<float>();
      for (int64_t k = 0; k < t.local.numel(); ++k) {
        if (values[k] != static_cast<float>(begin + k + step)) return false;
      }
    }
    return true;
  }
};

// Sharded state survives a loss without disk: each member keeps its neighbour's slices, and after
// the reform the survivors' new slices (a 3-way cut instead of 4, where rank 2 holds no "small")
// are filled from their own old slices and the copy of the lost one's.
TEST(Elastic, ShardedStateSurvivesALossThroughNeighbourCopies) {
  auto outcomes = test::runRanks({.worldSize = 4, .killedRanks = {2}}, [](test::RankEnv& env) {
    auto elastic = std::make_unique<ElasticGroup>(shared(env.store), env.rank, env.size, quick());
    elastic::ShardCopies copies(*elastic);
    auto shard = std::make_unique<ShardedTensor>(elastic->rank(), elastic->size(), 0);
    int reforms = 0;
    while (elastic->step() < 6) {
      if (env.rank == 2 && elastic->step() == 3) {
        elastic::recordLauncherEnd(env.store, 2);  // as c10drun records it
        ::raise(SIGKILL);
      }
      float one = 1.0f;
      bool ok = true;
      try {
        elastic->group().allreduce(Tensor::fromBlob(&one, ScalarType::Float32, {1}))->wait();
      } catch (const Error&) {
        ok = false;
      }
      if (elastic->commit(ok)) {
        shard->step();
        copies.refresh(shard->state);
        // Every copy of this step arrived before anyone goes on: the kill below comes after.
        check(copies.wait(), "the exchange of copies");
        continue;
      }
      const elastic::Reformation r = elastic->reform();
      auto next = std::make_unique<ShardedTensor>(elastic->rank(), elastic->size(), 0);
      next->zero();
      copies.restore(shard->state, next->state, r);
      shard = std::move(next);
      check(shard->holds(elastic->step()), "the new slice holds the committed step's values");
      ++reforms;
    }
    checkEq(1, reforms, "reforms");
    checkEq(std::vector<int>{0, 1, 3}, elastic->members(), "members");
    check(shard->holds(6), "the slice after 6 steps");
    check(copies.bytes() > 0, "the copies take memory");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0, 128 + SIGKILL, 0}))
      << test::report(outcomes);
}

// Two neighbours lost at once: the slices of the second were held only by the first, so restore
// says so on every survivor, naming both, instead of filling in zeros.
TEST(Elastic, ShardCopiesOfTwoLostNeighboursAreAnErrorNamingThem) {
  auto outcomes = test::runRanks({.worldSize = 4, .killedRanks = {1, 2}}, [](test::RankEnv& env) {
    ElasticGroup elastic(shared(env.store), env.rank, env.size, quick());
    elastic::ShardCopies copies(elastic);
    ShardedTensor shard(elastic.rank(), elastic.size(), 0);
    check(elastic.commit(true), "a step of all four");
    shard.step();
    copies.refresh(shard.state);
    check(copies.wait(), "the exchange of copies");
    if (env.rank == 1 || env.rank == 2) {
      // Past the exchange of step 1's copies, then gone.
      float one = 1.0f;
      elastic.group().allreduce(Tensor::fromBlob(&one, ScalarType::Float32, {1}))->wait();
      elastic::recordLauncherEnd(env.store, env.rank);
      ::raise(SIGKILL);
    }
    float one = 1.0f;
    elastic.group().allreduce(Tensor::fromBlob(&one, ScalarType::Float32, {1}))->wait();
    check(!elastic.commit(true), "a commit with two dead ranks fails");
    const elastic::Reformation r = elastic.reform();
    ShardedTensor next(elastic.rank(), elastic.size(), 0);
    test::expectThrows<StateError>(
        [&] { copies.restore(shard.state, next.state, r); }, "restore",
        {"the slices of lost id(s) 2 were held only by id(s) 1, lost too"});
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 128 + SIGKILL, 128 + SIGKILL, 0}))
      << test::report(outcomes);
}

TEST(Elastic, GroupsOfAnOldGenerationSayTheyWereReformed) {
  auto outcomes = test::runRanks({.worldSize = 2}, [](test::RankEnv& env) {
    ElasticGroup elastic(shared(env.store), env.rank, env.size, quick());
    std::shared_ptr<ProcessGroup> old = elastic.sharedGroup();
    std::shared_ptr<ProcessGroup> sub = old->newGroup({0, 1});
    std::shared_ptr<ProcessGroup> subsub = sub->split(0);
    elastic.reform();
    float value = 1.0f;
    for (const auto& group : {old, sub, subsub}) {
      test::expectThrows<StateError>(
          [&] { group->allreduce(Tensor::fromBlob(&value, ScalarType::Float32, {1})); },
          "an old generation's group", {"c10d::elastic re-formed it into generation 1"});
    }
    checkEq(3.0f, sumOfRanks(elastic), "the new generation works");
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(2, 0)) << test::report(outcomes);
}

TEST(Elastic, RefusesBadOptions) {
  auto outcomes = test::runRanks({.worldSize = 1}, [](test::RankEnv& env) {
    test::expectThrows<InvalidArgument>(
        [&] { ElasticGroup(shared(env.store), 0, 1, quick(/*minSize=*/2)); }, "minSize",
        {"ElasticOptions::minSize must be in [1, 1], got 2"});
    test::expectThrows<InvalidArgument>([&] { ElasticGroup(shared(env.store), 3, 2, quick()); },
                                        "id", {"id 3 is out of range for size 2"});
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(1, 0)) << test::report(outcomes);
}

}  // namespace
}  // namespace c10d::inline v1
