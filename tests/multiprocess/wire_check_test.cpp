// The always-on check that ranks make the same collective (backends/gloo/transport/WireCall.hpp),
// at the default C10D_DEBUG (OFF), on forked Gloo ranks. Before it, each of these calls returned
// success with wrong data (a partial sum, the other op's bytes), or aborted the process from
// Gloo's device thread.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>

#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;

Tensor filled(int64_t count, float value, ScalarType dtype = ScalarType::Float32) {
  Tensor t = Tensor::empty({count}, dtype);
  if (dtype == ScalarType::Float32) std::fill(t.data<float>(), t.data<float>() + count, value);
  return t;
}

// Sets an environment variable for the ranks forked while it lives.
class EnvForRanks {
 public:
  EnvForRanks(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~EnvForRanks() { ::unsetenv(name_); }

 private:
  const char* name_;
};

// On the small-message path a mismatch breaks the group: the rank that reads the other's
// message fails with BackendError naming both calls, and the other fails (now or at its next
// op) quoting it as the group's first failure.
void expectBothRanksNameBoth(const std::function<void(test::RankEnv&)>& mismatched,
                             std::initializer_list<std::string_view> needles) {
  auto outcomes = test::runRanks(
      {.backend = "gloo", .worldSize = 2, .opTimeout = 20s}, [&](test::RankEnv& env) {
        std::string error;
        try {
          mismatched(env);
          env.pg.barrier()->wait();  // meets the break if the op did not
        } catch (const Error& e) {
          error = e.what();
        }
        test::check(!error.empty(), "the mismatched calls failed");
        for (std::string_view needle : needles) {
          test::check(error.find(needle) != std::string::npos,
                      "the error names '" + std::string(needle) + "': " + error);
        }
      });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(2, 0)) << test::report(outcomes);
}

TEST(WireCheckTest, AllreducesOfDifferentSizesFailOnBothRanks) {
  expectBothRanksNameBoth(
      [](test::RankEnv& env) {
        Tensor t = filled(env.rank == 0 ? 4 : 8, 1.0f);
        env.pg.allreduce(t)->wait();
      },
      {"allreduce float32 x 4 sum (#0)", "allreduce float32 x 8 sum (#0)"});
}

TEST(WireCheckTest, DifferentDtypesAndReduceOpsFailOnBothRanks) {
  expectBothRanksNameBoth(
      [](test::RankEnv& env) {
        Tensor t = filled(4, 1.0f, env.rank == 0 ? ScalarType::Float32 : ScalarType::Int32);
        env.pg.allreduce(t)->wait();
      },
      {"allreduce float32 x 4 sum", "allreduce int32 x 4 sum"});
  expectBothRanksNameBoth(
      [](test::RankEnv& env) {
        Tensor t = filled(4, 1.0f);
        env.pg.allreduce(t, {.reduceOp = env.rank == 0 ? ReduceOp::SUM : ReduceOp::MAX})->wait();
      },
      {"allreduce float32 x 4 sum", "allreduce float32 x 4 max"});
}

TEST(WireCheckTest, ABroadcastMatchedWithAnAllreduceFails) {
  expectBothRanksNameBoth(
      [](test::RankEnv& env) {
        Tensor t = filled(4, static_cast<float>(env.rank + 1));
        if (env.rank == 0) {
          env.pg.broadcast(t, {.rootRank = 0})->wait();  // the root only sends: its data is right
        } else {
          env.pg.allreduce(t)->wait();
        }
      },
      {"broadcast float32 x 4 root 0 (#0)", "allreduce float32 x 4 sum (#0)"});
}

TEST(WireCheckTest, ABarrierMatchedWithAnAllreduceFails) {
  expectBothRanksNameBoth(
      [](test::RankEnv& env) {
        Tensor t = filled(4, 1.0f);
        if (env.rank == 0) {
          env.pg.barrier()->wait();
        } else {
          env.pg.allreduce(t)->wait();
        }
      },
      {"barrier (#0)", "allreduce float32 x 4 sum (#0)"});
}

// Ops that take Gloo's own algorithms (here: gather and scatter; below: the fast path off) agree
// on the call first, so every rank gets the same error and the group stays usable.
void expectSameErrorAndAUsableGroup(const std::function<void(test::RankEnv&)>& mismatched,
                                    std::initializer_list<std::string_view> needles) {
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 3}, [&](test::RankEnv& env) {
    test::expectThrows<InvalidArgument>([&] { mismatched(env); }, "the mismatched calls", needles);
    Tensor ones = filled(5, 1.0f);
    env.pg.allreduce(ones)->wait();
    test::checkEq(3.0f, ones.data<float>()[4], "an allreduce after the mismatch");
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(3, 0)) << test::report(outcomes);
}

TEST(WireCheckTest, OnGloosOwnAlgorithmsEveryRankNamesEveryCallAndTheGroupStaysUsable) {
  expectSameErrorAndAUsableGroup(
      [](test::RankEnv& env) {
        Tensor t = filled(env.rank == 2 ? 6 : 5, 1.0f);
        std::vector<Tensor> gathered;
        if (env.rank == 0) {
          for (int r = 0; r < env.size; ++r) gathered.push_back(filled(5, 0.0f));
        }
        env.pg.gather(gathered, t, {.rootRank = 0})->wait();
      },
      {"rank(s) 0, 1: gather float32 x 5 root 0 (#0); rank(s) 2: gather float32 x 6 root 0 "
       "(#0)"});
  expectSameErrorAndAUsableGroup(
      [](test::RankEnv& env) {
        const int root = env.rank == 1 ? 1 : 0;
        Tensor t = filled(5, 1.0f);
        std::vector<Tensor> parts;
        if (env.rank == root) {
          for (int r = 0; r < env.size; ++r) parts.push_back(filled(5, 2.0f));
        }
        env.pg.scatter(t, parts, {.rootRank = root})->wait();
      },
      {"rank(s) 0, 2: scatter float32 x 5 root 0 (#0); rank(s) 1: scatter float32 x 5 root 1 "
       "(#0)"});
}

TEST(WireCheckTest, WithTheFastPathOffASizeMismatchIsAnErrorNotAnAbort) {
  EnvForRanks noFastPath("C10D_GLOO_FAST_PATH", "0");
  expectSameErrorAndAUsableGroup(
      [](test::RankEnv& env) {
        Tensor t = filled(env.rank == 0 ? 1000 : 5, 1.0f);
        env.pg.allreduce(t)->wait();
      },
      {"rank(s) 0: allreduce float32 x 1000 sum (#0); rank(s) 1, 2: allreduce float32 x 5 sum "
       "(#0)"});
}

TEST(WireCheckTest, AlltoallSplitsThatDisagreeBetweenRanksAreFoundOnEveryRank) {
  expectSameErrorAndAUsableGroup(
      [](test::RankEnv& env) {
        // Every rank sends 2 rows to each; rank 0 expects 3 from rank 1 and 1 from rank 2.
        std::vector<int64_t> in{2, 2, 2};
        std::vector<int64_t> out =
            env.rank == 0 ? std::vector<int64_t>{2, 3, 1} : std::vector<int64_t>{2, 2, 2};
        Tensor input = filled(6, 1.0f);
        Tensor output = filled(6, 0.0f);
        env.pg.alltoallBase(output, input, out, in)->wait();
      },
      {"rank 1 sends 8 bytes to rank 0, which expects 12",
       "rank 2 sends 8 bytes to rank 0, which expects 4"});
}

TEST(WireCheckTest, AlltoallSplitsThatDisagreeOnOneRankAreRefusedBeforeAnythingIsSent) {
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 2}, [](test::RankEnv& env) {
    Tensor input = filled(6, 1.0f);
    Tensor output = filled(6, 0.0f);
    if (env.rank == 0) {
      test::expectThrows<InvalidArgument>(
          [&] {
            env.pg.alltoallBase(output, input, {1, 5}, {3, 3})->wait();
          },
          "own splits that disagree", {"rank 0 sends itself 3 rows but expects 1 from itself"});
    }
    env.pg.alltoallBase(output, input, {3, 3}, {3, 3})->wait();
    test::checkEq(1.0f, output.data<float>()[5], "an alltoall after the refused one");
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(2, 0)) << test::report(outcomes);
}

// Point-to-point sizes, small (in the message's head) and large (head and bulk): a send larger
// than its receive used to abort the receiving process from Gloo's device thread, a smaller one
// left a stale tail and reported success. Now both Works fail naming both sizes, the ranks and
// the tag, and the pair is still in step: a matching exchange after each works.
TEST(WireCheckTest, PointToPointSizesThatDisagreeFailBothSidesAndTheGroupStaysUsable) {
  auto outcomes =
      test::runRanks({.backend = "gloo", .worldSize = 2, .opTimeout = 20s}, [](test::RankEnv& env) {
        struct Case {
          int64_t sent, taken;
          const char* what;
        };
        const Case cases[] = {{8, 4, "larger (head only)"},
                              {4, 8, "smaller (head only)"},
                              {300000, 100000, "larger (bulk)"},
                              {100000, 300000, "smaller (bulk)"},
                              {70000, 60000, "larger (bulk sent, taken from the head)"}};
        int tag = 0;
        for (const Case& c : cases) {
          ++tag;
          const std::string sizes = "rank 0 sent " + std::to_string(c.sent * 4) +
                                    " bytes and rank 1's receive takes " +
                                    std::to_string(c.taken * 4);
          if (env.rank == 0) {
            Tensor out = filled(c.sent, 7.0f);
            test::expectThrows<InvalidArgument>([&] { env.pg.send(out, 1, tag)->wait(); },
                                                std::string("send, ") + c.what,
                                                {sizes, "tag " + std::to_string(tag)});
          } else {
            Tensor in = filled(c.taken, -1.0f);
            test::expectThrows<InvalidArgument>([&] { env.pg.recv(in, 0, tag)->wait(); },
                                                std::string("recv, ") + c.what,
                                                {sizes, "tag " + std::to_string(tag)});
            const bool fitted = c.sent < c.taken;
            test::checkEq(fitted ? 7.0f : -1.0f, in.data<float>()[0],
                          std::string("the start of the receive, ") + c.what);
            test::checkEq(-1.0f, in.data<float>()[c.taken - 1],
                          std::string("the end of the receive, ") + c.what);
          }
          // The same pair, the same tag, matching sizes: delivered whole.
          Tensor exchange = filled(c.taken, env.rank == 0 ? 3.0f : 0.0f);
          if (env.rank == 0) {
            env.pg.send(exchange, 1, tag)->wait();
          } else {
            env.pg.recv(exchange, 0, tag)->wait();
            test::checkEq(3.0f, exchange.data<float>()[c.taken - 1],
                          std::string("a matching message after ") + c.what);
          }
        }
        // A receive from any source is checked the same way.
        if (env.rank == 0) {
          test::expectThrows<InvalidArgument>(
              [&] { env.pg.send(filled(16, 1.0f), 1, 99)->wait(); }, "send to recv_anysource",
              {"rank 0 sent 64 bytes and rank 1's receive takes 32"});
        } else {
          test::expectThrows<InvalidArgument>(
              [&] { env.pg.recvAnysource(filled(8, 0.0f), 99)->wait(); }, "recv_anysource",
              {"rank 0 sent 64 bytes and rank 1's receive takes 32"});
        }
        env.pg.barrier()->wait();
      });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(2, 0)) << test::report(outcomes);
}

}  // namespace
}  // namespace c10d::inline v1
