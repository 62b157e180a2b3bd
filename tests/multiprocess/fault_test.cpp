// Real process kills: a rank SIGKILLed in the middle of a collective, an RPC worker killed with
// a call in flight to it, and the store's host killed under clients blocked on it. The survivors
// must fail well inside their timeout, with an error that names what was lost.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <deque>
#include <filesystem>
#include <thread>

#include "rpc/RpcAgent.hpp"
#include "store/PrefixStore.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kKilled = 128 + SIGKILL;

// The op timeout is far above the bound checked, so a pass means the lost connection was
// noticed, not that the op timed out.
constexpr auto kOpTimeout = 60s;
constexpr auto kNoticedWithin = 15s;

test::RunOptions ranksLosing(int killed, int worldSize = 3) {
  return {.backend = "gloo",
          .worldSize = worldSize,
          .opTimeout = kOpTimeout,
          .deadline = 100s,  // under ctest's 120 s, so the harness reports, not ctest
          .graceAfterFailure = 30s,
          .killedRanks = {killed}};
}

// Runs fn, which must throw well before kOpTimeout, and returns the error's message; context,
// when given, gets the error's fields.
template <typename Fn>
std::string errorSoonFrom(Fn&& fn, const std::string& what, ErrorContext* context = nullptr) {
  auto start = Clock::now();
  std::string error;
  try {
    fn();
  } catch (const Error& e) {
    error = e.what();
    if (context != nullptr) *context = e.context();
  } catch (const std::exception& e) {
    error = e.what();
  }
  test::check(!error.empty(), what + " failed");
  test::check(Clock::now() - start < kNoticedWithin, what + " failed well before its timeout");
  return error;
}

// What of ours /dev/shm holds: a killed rank must leave nothing there (the same-host
// transport's segments have no name: c10d/net/SharedMemory.hpp). Only names with "c10d" count:
// tests running beside this one (Open MPI's, whose segments come and go) own the rest.
std::vector<std::string> devShm() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    std::string name = entry.path().filename().string();
    if (name.find("c10d") != std::string::npos) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(FaultTest, GlooSurvivorsOfAKilledRankFailNamingIt) {
  const std::vector<std::string> before = devShm();
  auto outcomes = test::runRanks(ranksLosing(2), [](test::RankEnv& env) {
    Tensor tensor = Tensor::zeros({4096}, ScalarType::Float32);
    for (int i = 0; i < 5; ++i) env.pg.allreduce(tensor)->wait();
    if (env.rank == 2) {
      auto work = env.pg.allreduce(tensor);  // in flight when the rank dies
      std::raise(SIGKILL);
    }
    // Loops so that a rank which got through the killed rank's last op meets the loss on its
    // next one.
    ErrorContext context;
    std::string error = errorSoonFrom(
        [&] {
          for (int i = 0; i < 100; ++i) env.pg.allreduce(tensor)->wait();
        },
        "an allreduce after rank 2 was killed", &context);
    test::check(error.find("rank 2 of group 'default' is no longer running") != std::string::npos,
                "the error names rank 2: " + error);
    // The same, as fields a framework can act on.
    test::checkEq(std::vector<int>{2}, context.peers, "context().peers");
    test::checkEq(std::string("allreduce"), context.op, "context().op");
    test::checkEq(std::string("default"), context.group, "context().group");
    test::checkEq(env.rank, context.rank, "context().rank");
    test::check(context.sequence >= 5, "context().sequence counts the 5 allreduces before");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0, kKilled})) << test::report(outcomes);
  EXPECT_EQ(devShm(), before) << "files left in /dev/shm";
}

// The same for point-to-point: a ring of sends and receives (over shared memory where that is
// on, with large messages read from the sender's memory), including a receive from any source,
// which waits on no pair in particular.
TEST(FaultTest, GlooPointToPointSurvivorsOfAKilledRankFailNamingIt) {
  const std::vector<std::string> before = devShm();
  auto outcomes = test::runRanks(ranksLosing(2), [](test::RankEnv& env) {
    const int right = (env.rank + 1) % env.size, left = (env.rank + env.size - 1) % env.size;
    for (int64_t elements : {int64_t{16}, int64_t{1} << 20}) {
      Tensor out = Tensor::zeros({elements}, ScalarType::Float32);
      Tensor in = Tensor::zeros({elements}, ScalarType::Float32);
      for (int i = 0; i < 5; ++i) {
        auto send = env.pg.send(out, right, 0);
        env.pg.recv(in, left, 0)->wait();
        send->wait();
      }
    }
    Tensor out = Tensor::zeros({1024}, ScalarType::Float32);
    Tensor in = Tensor::zeros({1024}, ScalarType::Float32);
    if (env.rank == 2) {
      auto send = env.pg.send(out, right, 0);  // in flight when the rank dies
      std::raise(SIGKILL);
    }
    std::string error = errorSoonFrom(
        [&] {
          for (int i = 0; i < 100; ++i) {
            auto send = env.pg.send(out, right, 0);
            auto recv = env.rank == 0 ? env.pg.recvAnysource(in, 0) : env.pg.recv(in, left, 0);
            recv->wait();
            send->wait();
          }
        },
        "a send/recv ring after rank 2 was killed");
    test::check(error.find("rank 2 of group 'default' is no longer running") != std::string::npos,
                "the error names rank 2: " + error);
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0, kKilled})) << test::report(outcomes);
  EXPECT_EQ(devShm(), before) << "files left in /dev/shm";
}

// A broadcast's root only writes. Once its peer is gone, its first write draws a reset and the
// next one raises SIGPIPE, whose default action ended the root silently (exit 141). Now that
// write fails with EPIPE, the root gets an error naming the lost rank, and its signal mask and
// SIGPIPE's disposition are what they were.
TEST(FaultTest, GlooRootWritingToAKilledRankFailsInsteadOfDyingOfSigpipe) {
  auto outcomes = test::runRanks(ranksLosing(1, 2), [](test::RankEnv& env) {
    Tensor tensor = Tensor::zeros({16}, ScalarType::Float32);
    env.pg.barrier()->wait();
    if (env.rank == 1) std::raise(SIGKILL);
    std::this_thread::sleep_for(300ms);  // the kernel has closed rank 1's sockets by now
    struct sigaction before {};
    ::sigaction(SIGPIPE, nullptr, &before);
    test::check(before.sa_handler == SIG_DFL, "SIGPIPE has its default action in this test");
    std::string error = errorSoonFrom(
        [&] {
          for (int i = 0; i < 100; ++i) env.pg.broadcast(tensor, {.rootRank = 0})->wait();
        },
        "broadcasts from rank 0 after rank 1 was killed");
    test::check(error.find("rank 1 of group 'default' is no longer running") != std::string::npos,
                "the error names rank 1: " + error);
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    test::check(!sigismember(&mask, SIGPIPE), "SIGPIPE is not left blocked in the caller's thread");
    struct sigaction after {};
    ::sigaction(SIGPIPE, nullptr, &after);
    test::check(after.sa_handler == SIG_DFL, "SIGPIPE's disposition is untouched");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, kKilled})) << test::report(outcomes);
}

TEST(FaultTest, StoreClientsFailWhenTheStoreHostIsKilled) {
  auto outcomes = test::runRanks(ranksLosing(0), [](test::RankEnv& env) {
    env.pg.barrier()->wait();
    if (env.rank == 0) {  // hosts the TCPStore
      env.store.wait({"clients-parked"}, 30s);
      std::this_thread::sleep_for(200ms);  // let both clients block in wait()
      std::raise(SIGKILL);
    }
    if (env.store.add("parked", 1) == 2) env.store.setString("clients-parked", "1");
    std::string error = errorSoonFrom([&] { env.store.wait({"never-set"}, kOpTimeout); },
                                      "wait() on a store whose host was killed");
    test::check(error.find("TCPStore wait 'never-set'") != std::string::npos,
                "the error names the op and the key: " + error);
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{kKilled, 0, 0})) << test::report(outcomes);
}

// Rank 2 stays alive but stops calling collectives: the others time out, and their errors say
// that rank 2 is behind (it never reached the collective), not just that they timed out.
TEST(FaultTest, GlooTimeoutNamesTheRankThatStoppedCallingCollectives) {
  test::RunOptions options{.backend = "gloo", .worldSize = 3, .opTimeout = 2s};
  auto outcomes = test::runRanks(options, [](test::RankEnv& env) {
    Tensor tensor = Tensor::zeros({1024}, ScalarType::Float32);
    for (int i = 0; i < 3; ++i) env.pg.allreduce(tensor)->wait();
    if (env.rank == 2) {
      env.store.wait({"others-failed/go"}, 30s);  // alive, doing something else
      return;
    }
    ErrorContext context;
    test::expectThrows<TimeoutError>(
        [&] {
          try {
            env.pg.allreduce(tensor)->wait();
          } catch (const Error& e) {
            context = e.context();
            throw;
          }
        },
        "an allreduce that rank 2 never joins",
        {"rank(s) 2 of group 'default' are behind: they never reached this collective (seq 3)"});
    test::checkEq(std::vector<int>{2}, context.peers, "context().peers: the rank behind");
    test::checkEq(int64_t{3}, context.sequence, "context().sequence");
    test::checkEq(std::string("allreduce"), context.op, "context().op");
    test::storeBarrier(env.store, "others-failed", 2);
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0, 0})) << test::report(outcomes);
}

// Worker w2 is killed while w0 has a call in flight to it. The survivors' calls to it, in
// flight or made after, fail with the same RemoteError naming 'w2' (id 2); their graceful
// shutdowns fail at once naming it instead of waiting the RPC timeout; and the agents are closed
// afterwards (a call is refused, nothing reaches the wire).
TEST(FaultTest, RpcSurvivorsOfAKilledWorkerNameItAndShutDownAtOnce) {
  auto outcomes = test::runRanks(ranksLosing(2), [](test::RankEnv& env) {
    auto store =
        std::make_shared<PrefixStore>("rpc", std::shared_ptr<Store>(&env.store, [](Store*) {}));
    rpc::RpcOptions options;
    options.timeout = kOpTimeout;
    auto agent = rpc::RpcAgent::create(
        store, "w" + std::to_string(env.rank), env.rank, env.size, options, [](rpc::RpcAgent& a) {
          a.registerFunction("echo", [](int x) { return x; });
          a.registerFunction("hang", [] { std::this_thread::sleep_for(120s); });
        });
    test::checkEq(7, agent->rpcSync<int>("w" + std::to_string((env.rank + 1) % 3), "echo", 7),
                  "a call to the next worker before the kill");
    std::optional<rpc::Future<void>> inFlight;
    if (env.rank == 0) {
      inFlight = agent->rpcAsync<void>("w2", "hang");
      env.store.setString("hang-sent", "1");
    }
    if (env.rank == 1) env.store.setString("echoed/1", "1");
    if (env.rank == 2) {
      // Not before rank 1's call to it has its reply (once in about 30 runs under load, it had
      // not, and rank 1 failed that call instead of the later ones).
      env.store.wait({"hang-sent", "echoed/1"}, 30s);
      std::raise(SIGKILL);
    }
    const std::string named = "worker 'w2' (id 2)";
    if (inFlight) {
      std::string error = test::expectThrows<RemoteError>([&] { inFlight->value(); },
                                                          "the call in flight to w2", {named});
      test::check(error.find("connection was lost") != std::string::npos, error);
      try {
        inFlight->value();
      } catch (const RemoteError& e) {
        test::checkEq(std::string("w2"), e.context().worker, "context().worker");
        test::checkEq(std::string("hang"), e.context().op, "context().op");
      }
    }
    // Calls until the loss is seen here too; then a call made after it fails like one in flight.
    std::string after = errorSoonFrom(
        [&] {
          for (int i = 0; i < 100000; ++i) {
            agent->rpcSync<int>("w2", "echo", i);
            std::this_thread::sleep_for(1ms);
          }
        },
        "calls to w2 after it was killed");
    test::expectThrows<RemoteError>([&] { agent->rpcSync<int>("w2", "echo", 1); },
                                    "a call to w2 made after the loss",
                                    {named, "connection was lost"});
    test::check(after.find(named) != std::string::npos, "the first failed call names w2: " + after);

    std::string shutdown = errorSoonFrom([&] { agent->shutdown(); }, "graceful shutdown");
    test::check(shutdown.find("graceful shutdown: " + named + " is gone") != std::string::npos,
                "the shutdown error names w2: " + shutdown);
    test::expectThrows<StateError>([&] { agent->rpcSync<int>("w1", "echo", 1); },
                                   "a call after the failed shutdown", {"shut down"});
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0, kKilled})) << test::report(outcomes);
}

// Large tensors between workers on one host are lent (read from the sender's memory), so a
// worker killed while its callers copy its results must fail them as a broken TCP stream does.
// Under shm_off the same calls stream over TCP.
TEST(FaultTest, RpcCallersOfAWorkerKilledWhileTheyCopyItsTensorsFailNamingIt) {
  auto outcomes = test::runRanks(ranksLosing(2), [](test::RankEnv& env) {
    auto store =
        std::make_shared<PrefixStore>("rpc", std::shared_ptr<Store>(&env.store, [](Store*) {}));
    rpc::RpcOptions options;
    options.timeout = kOpTimeout;
    constexpr int64_t kIn = 256 * 1024;    // floats: 1 MiB arguments
    constexpr int64_t kOut = 1024 * 1024;  // floats: 4 MiB results
    std::atomic<int> served{0};
    auto agent = rpc::RpcAgent::create(store, "w" + std::to_string(env.rank), env.rank, env.size,
                                       options, [&](rpc::RpcAgent& a) {
                                         a.registerFunction("widen", [&](const Tensor& in) {
                                           Tensor out = Tensor::empty({kOut}, ScalarType::Float32);
                                           const float first = in.data<float>()[0];
                                           std::fill_n(out.data<float>(), kOut, first + 1.0f);
                                           ++served;
                                           return out;
                                         });
                                       });
    auto widenOn = [&](const std::string& worker, int call) {
      Tensor in = Tensor::empty({kIn}, ScalarType::Float32);
      std::fill_n(in.data<float>(), kIn, static_cast<float>(call));
      return agent->rpcAsync<Tensor>(worker, "widen", in);
    };
    auto checkWidened = [&](const Tensor& out, int call) {
      test::checkEq(kOut, out.numel(), "elements of a result");
      test::checkEq(static_cast<float>(call) + 1.0f, out.data<float>()[kOut / 2], "a result");
      test::checkEq(static_cast<float>(call) + 1.0f, out.data<float>()[kOut - 1], "its last");
    };
    if (env.rank == 2) {
      // Killed from a thread of its own while its callers keep calls in flight, so that the kill
      // can come while a result is being copied out of this process.
      while (served.load() < 40) std::this_thread::sleep_for(100us);
      std::raise(SIGKILL);
    }
    const std::string named = "worker 'w2' (id 2)";
    int call = 0;
    std::string error = errorSoonFrom(
        [&] {
          std::deque<std::pair<int, rpc::Future<Tensor>>> inFlight;
          for (; call < 100000; ++call) {
            inFlight.emplace_back(call, widenOn("w2", call));
            if (inFlight.size() < 3) continue;
            checkWidened(inFlight.front().second.value(), inFlight.front().first);
            inFlight.pop_front();
          }
        },
        "calls to w2 as it is killed");
    test::check(error.find(named) != std::string::npos, "the error names w2: " + error);
    test::check(call >= 3, "calls to w2 succeeded before the kill");
    // The survivors still lend to each other.
    const int peer = 1 - env.rank;
    for (int i = 0; i < 5; ++i) checkWidened(widenOn("w" + std::to_string(peer), i).value(), i);
    env.store.setString("survivors-done/" + std::to_string(env.rank), "1");
    env.store.wait({"survivors-done/" + std::to_string(peer)}, 30s);
    std::string shutdown = errorSoonFrom([&] { agent->shutdown(); }, "graceful shutdown");
    test::check(shutdown.find(named) != std::string::npos, "the shutdown error names w2");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0, kKilled})) << test::report(outcomes);
}

}  // namespace
}  // namespace c10d::inline v1
