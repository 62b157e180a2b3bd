// The fusion queue (c10d/training/FusionQueue.hpp) across forked ranks: names submitted in a
// different order on every rank reduce correctly everywhere, through the first (exchanging) and
// the cached cycles; small allreduces are fused; mismatched requests fail on every rank naming
// the tensor, the ranks and the difference; a rank that never submits a name is named in a stall
// warning and the others' Futures end at the group's timeout; the timeline is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "c10d/training/FusionQueue.hpp"
#include "tests/support/MultiProcess.hpp"
#include "tests/support/RanksOnBackend.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;
using test::check;
using test::checkEq;
using test::RankEnv;

template <typename... Args>
std::string str(const Args&... args) {
  return detail::concat(args...);
}

class Fusion : public test::RanksOnBackend {
 protected:
  Fusion() : RanksOnBackend("fusion_mpi_W") {}
};

float value(int rank, int tensor, int64_t e, int round) {
  return static_cast<float>((rank + 1) * 0.5 + tensor * 0.25 + (e % 3) * 0.125 + round);
}

TEST_P(Fusion, RanksSubmittingInDifferentOrdersGetTheSameResults) {
  runOnRanks([](RankEnv& env) {
    FusionQueue queue(env.pg);
    constexpr int kTensors = 12;
    for (int round = 0; round < 4; ++round) {  // round 0 exchanges; later rounds hit the cache
      std::vector<int> order(kTensors);
      for (int t = 0; t < kTensors; ++t) order[t] = t;
      std::mt19937 random(static_cast<unsigned>(env.rank * 7 + round));
      std::shuffle(order.begin(), order.end(), random);
      std::vector<Tensor> sums(kTensors), inputs(kTensors), gathered(kTensors),
          broadcasts(kTensors);
      std::vector<std::shared_ptr<Future>> futures;
      for (int t : order) {
        const int64_t n = 5 + 37 * t;
        sums[t] = Tensor::empty({n}, ScalarType::Float32);
        for (int64_t e = 0; e < n; ++e) sums[t].data<float>()[e] = value(env.rank, t, e, round);
        futures.push_back(queue.allreduce(str("sum.", t), sums[t], ReduceOp::SUM));
        if (t % 4 == 0) {
          inputs[t] = Tensor::empty({3}, ScalarType::Int64);
          gathered[t] = Tensor::empty({3 * env.size}, ScalarType::Int64);
          for (int e = 0; e < 3; ++e) inputs[t].data<int64_t>()[e] = env.rank * 100 + t * 10 + e;
          futures.push_back(queue.allgather(str("gather.", t), inputs[t], gathered[t]));
        }
        if (t % 4 == 1) {
          broadcasts[t] = Tensor::empty({4}, ScalarType::Float64);
          for (int e = 0; e < 4; ++e) broadcasts[t].data<double>()[e] = env.rank * 1000 + e;
          futures.push_back(queue.broadcast(str("bcast.", t), broadcasts[t], env.size - 1));
        }
      }
      for (auto& f : futures) f->wait(30s, "a fusion queue future");
      for (int t = 0; t < kTensors; ++t) {
        for (int64_t e = 0; e < sums[t].numel(); ++e) {
          double expected = 0;
          for (int r = 0; r < env.size; ++r) expected += value(r, t, e, round);
          if (sums[t].data<float>()[e] != static_cast<float>(expected)) {
            test::fail(str("round ", round, " sum.", t, " element ", e, " is ",
                           sums[t].data<float>()[e], ", expected ", expected));
            break;
          }
        }
        if (t % 4 == 0) {
          for (int r = 0; r < env.size; ++r)
            for (int e = 0; e < 3; ++e)
              checkEq(int64_t{r * 100 + t * 10 + e}, gathered[t].data<int64_t>()[r * 3 + e],
                      str("round ", round, " gather.", t));
        }
        if (t % 4 == 1) {
          checkEq(double((env.size - 1) * 1000 + 3), broadcasts[t].data<double>()[3],
                  str("round ", round, " bcast.", t));
        }
      }
    }
    FusionStats stats = queue.stats();
    if (env.size > 1) {
      // 12 allreduces, 3 allgathers and 3 broadcasts a round: the allreduces fuse.
      check(stats.collectives < 4 * (kTensors + 6),
            str("the allreduces were fused: ", stats.collectives, " collectives for ",
                4 * (kTensors + 6), " requests"));
      check(stats.exchanges >= 1 && stats.exchanges < stats.cycles,
            str("later rounds went through the cache: ", stats.exchanges, " exchanges in ",
                stats.cycles, " cycles"));
    }
    checkEq(uint64_t{4 * (kTensors + 6)}, stats.tensors, "requests completed");
  });
}

TEST_P(Fusion, MismatchedRequestsFailOnEveryRankNamingTheDifference) {
  if (worldSize() < 2) GTEST_SKIP() << "a mismatch needs two ranks";
  runOnRanks([](RankEnv& env) {
    FusionQueue queue(env.pg);
    const bool odd = env.rank == env.size - 1;
    Tensor t = Tensor::zeros({odd ? 6 : 4}, ScalarType::Float32);
    Tensor fine = Tensor::zeros({2}, ScalarType::Float32);
    auto bad = queue.allreduce("w", t);
    auto good = queue.allreduce("b", fine);
    test::expectThrows<InvalidArgument>([&] { bad->wait(30s, "w"); }, "a mismatched allreduce",
                                        {"'w': rank 0 submitted allreduce float32[4] avg",
                                         str("rank ", env.size - 1, " allreduce float32[6] avg")});
    good->wait(30s, "b");
    // The queue goes on: the same name again, now agreed.
    Tensor again = Tensor::zeros({4}, ScalarType::Float32);
    queue.allreduce("w", again)->wait(30s, "w again");
  });
}

TEST_P(Fusion, ARankThatNeverSubmitsIsNamedAndTheOthersTimeOut) {
  if (worldSize() < 2) GTEST_SKIP() << "needs a rank that does not submit";
  const int size = worldSize();
  auto outcomes = test::runRanks(
      {.backend = GetParam().backend, .worldSize = size, .opTimeout = 3s}, [](RankEnv& env) {
        FusionOptions options;
        options.stallWarning = 500ms;
        FusionQueue queue(env.pg, options);
        if (env.rank == env.size - 1) {
          // Never submits "x"; keeps its queue (and so the others') running until they are done.
          std::vector<std::string> done;
          for (int r = 0; r + 1 < env.size; ++r)
            done.push_back("fusion-test/done/" + std::to_string(r));
          env.store.wait(done, 30s);
          return;
        }
        Tensor t = Tensor::zeros({4}, ScalarType::Float32);
        auto start = std::chrono::steady_clock::now();
        test::expectThrows<TimeoutError>(
            [&] { queue.allreduce("x", t)->wait(20s, "x"); }, "a name one rank never submits",
            {"'x': rank(s) " + std::to_string(env.size - 1), "did not submit it within 3000 ms"});
        check(std::chrono::steady_clock::now() - start < 10s, "ended near the group timeout");
        // One rank's shutdown stops every rank's queue: leave together.
        env.store.setString("fusion-test/done/" + std::to_string(env.rank), "1");
        std::vector<std::string> done;
        for (int r = 0; r + 1 < env.size; ++r)
          done.push_back("fusion-test/done/" + std::to_string(r));
        env.store.wait(done, 30s);
      });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(size, 0)) << test::report(outcomes);
  // Under mpirun the ranks are this process: their output is not captured.
  for (int r = 0; r + 1 < size && GetParam().backend != "mpi"; ++r) {
    EXPECT_NE(outcomes[r].output.find("has waited"), std::string::npos) << outcomes[r].output;
    EXPECT_NE(outcomes[r].output.find("for rank(s) " + std::to_string(size - 1) +
                                      ", which have not submitted it"),
              std::string::npos)
        << outcomes[r].output;
  }
}

TEST_P(Fusion, TheTimelineIsAChromeTrace) {
  runOnRanks([](RankEnv& env) {
    std::string path = str(std::filesystem::temp_directory_path().string(), "/c10d_fusion_",
                           ::getpid(), "_", env.rank, ".json");
    {
      FusionOptions options;
      options.timelinePath = path;
      FusionQueue queue(env.pg, options);
      Tensor a = Tensor::zeros({8}, ScalarType::Float32),
             b = Tensor::zeros({8}, ScalarType::Float32);
      auto fa = queue.allreduce("layer.a", a);
      auto fb = queue.allreduce("layer.b", b);
      fa->wait(30s, "a");
      fb->wait(30s, "b");
    }
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::string trace = text.str();
    std::filesystem::remove(path);
    check(trace.rfind("{\"traceEvents\": [", 0) == 0,
          "the trace starts as Chrome's format: " + trace);
    check(trace.find("\"name\": \"negotiate\"") != std::string::npos &&
              trace.find("\"cat\": \"layer.a\"") != std::string::npos &&
              trace.find("\"args\": {\"name\": \"layer.b\"}") != std::string::npos,
          "the trace has each tensor's phases: " + trace);
  });
}

TEST_P(Fusion, MisuseIsRefusedWithItsReason) {
  runOnRanks([](RankEnv& env) {
    FusionQueue queue(env.pg);
    Tensor t = Tensor::zeros({4}, ScalarType::Float32);
    test::expectThrows<InvalidArgument>([&] { queue.allreduce("", t); }, "an empty name",
                                        {"needs a name"});
    Tensor flags = Tensor::zeros({4}, ScalarType::Bool);
    test::expectThrows<InvalidArgument>([&] { queue.allreduce("f", flags, ReduceOp::AVG); },
                                        "avg of bools", {"'f'"});
    auto first = queue.allreduce("dup", t);
    test::expectThrows<InvalidArgument>([&] { queue.allreduce("dup", t); }, "a name pending twice",
                                        {"'dup' is already pending"});
    first->wait(30s, "dup");
    queue.shutdown();
    test::expectThrows<StateError>([&] { queue.allreduce("late", t); }, "after shutdown",
                                   {"'late' after the queue shut down"});
  });
}

INSTANTIATE_TEST_SUITE_P(Gloo, Fusion, ::testing::ValuesIn(test::worldSizes("gloo")),
                         test::worldSizeName);
INSTANTIATE_TEST_SUITE_P(Mpi, Fusion, ::testing::ValuesIn(test::worldSizes("mpi")),
                         test::worldSizeName);

}  // namespace
}  // namespace c10d::inline v1
