// Remote references: creation, fetching, methods on the owner, passing references between
// workers in every direction, errors, and the reference counting itself: once every user has
// dropped its references, every owner's table is empty and no protocol message is left.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "rpc/RRef.hpp"
#include "tests/support/RpcTestUtil.hpp"

namespace c10d::inline v1::rpc {
namespace {

using namespace std::chrono_literals;
using test::messageOf;
using test::shutdownAll;
using test::startWorkers;

struct Counter {
  int value = 0;
  MSGPACK_DEFINE(value);
};

// Lives only on its owner.
struct Account : RemoteObject {
  std::unique_ptr<std::atomic<int>> balance = std::make_unique<std::atomic<int>>(0);
};

void registerAll(RpcAgent& agent) {
  agent.registerFunction("seven", [] { return 7; });
  agent.registerFunction("range", [](int n) {
    std::vector<int> out;
    for (int i = 0; i < n; ++i) out.push_back(i);
    return out;
  });
  agent.registerFunction("counter", [](int start) { return Counter{start}; });
  agent.registerFunction("fail", []() -> int { throw std::runtime_error("no value today"); });
  agent.registerFunction("nothing", [] {});
  agent.registerFunction("account", [] { return Account{}; });
  agent.registerFunction("tensor", [](int64_t n) {
    Tensor t = Tensor::empty({n}, ScalarType::Float32);
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i);
    return t;
  });
  // Takes a reference and fetches it where it runs (a third worker, or its owner).
  agent.registerFunction("sum", [](RRef<std::vector<int>> rref) {
    int total = 0;
    for (int x : rref.toHere()) total += x;
    return total;
  });
  agent.registerFunction("isOwnerHere", [](RRef<std::vector<int>> rref) { return rref.isOwner(); });
  // Hands back a reference it owns (owner to user).
  RpcAgent* self = &agent;
  agent.registerFunction("own", [self](int value) { return self->makeRRef(Counter{value}); });
  // Passes the reference it got on to another worker (user to user, twice removed).
  agent.registerFunction("forward", [self](RRef<std::vector<int>> rref, std::string to) {
    return self->rpcSync<int>(to, "sum", rref);
  });
  agent.registerMethod<Counter>("add", [](Counter& c, int n) {
    c.value += n;
    return c.value;
  });
  agent.registerMethod<Counter>("get", [](Counter& c) { return c.value; });
  agent.registerMethod<Account>("deposit", [](Account& a, int n) { return *a.balance += n; });
}

// Polls until every worker's RRef tables are empty (the deletions are asynchronous).
void expectNoReferencesLeft(const std::vector<std::shared_ptr<RpcAgent>>& agents) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  for (const auto& agent : agents) {
    RRefStats stats;
    while (true) {
      stats = agent->rrefStats();
      bool empty = stats.owned == 0 && stats.users == 0 && stats.pendingUsers == 0 &&
                   stats.pendingChildren == 0;
      if (empty || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(5ms);
    }
    EXPECT_EQ(stats.owned, 0u) << agent->self().name << " still owns values users hold";
    EXPECT_EQ(stats.users, 0u) << agent->self().name;
    EXPECT_EQ(stats.pendingUsers, 0u) << agent->self().name;
    EXPECT_EQ(stats.pendingChildren, 0u) << agent->self().name;
  }
}

TEST(RRefTest, RemoteValuesStayOnTheOwnerUntilTheLastUserDropsThem) {
  auto agents = startWorkers(2, {}, registerAll);
  {
    RRef<int> seven = agents[0]->remote<int>("worker1", "seven");
    EXPECT_FALSE(seven.isOwner());
    EXPECT_EQ(seven.owner().name, "worker1");
    EXPECT_EQ(seven.toHere(), 7);
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!seven.confirmedByOwner() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    EXPECT_TRUE(seven.confirmedByOwner());
    EXPECT_EQ(agents[1]->rrefStats().owned, 1u);
    EXPECT_EQ(agents[0]->rrefStats().users, 1u);
    // A copy shares the fork; toHere converts to compatible types.
    RRef<int> copy = seven;
    EXPECT_EQ(agents[0]->remote<double>("worker1", "seven").toHere(), 7.0);
    RRef<Tensor> tensor = agents[0]->remote<Tensor>("worker1", "tensor", int64_t{1000});
    Tensor fetched = tensor.toHereAsync().value();
    ASSERT_EQ(fetched.numel(), 1000);
    EXPECT_EQ(fetched.data<float>()[999], 999.0f);
    EXPECT_THROW(seven.localValue(), InvalidArgument);
  }
  expectNoReferencesLeft(agents);
  shutdownAll(agents);
}

TEST(RRefTest, OwnerSideValuesAndLocalValue) {
  auto agents = startWorkers(2, {}, registerAll);
  {
    // remote() to oneself and makeRRef() both give an owner's reference.
    RRef<Counter> mine = agents[0]->remote<Counter>("worker0", "counter", 5);
    EXPECT_TRUE(mine.isOwner());
    EXPECT_TRUE(mine.confirmedByOwner());
    EXPECT_EQ(mine.localValue().value, 5);
    mine.localValue().value = 6;
    EXPECT_EQ(mine.toHere().value, 6);
    RRef<int> made = agents[1]->makeRRef(41);
    EXPECT_EQ(made.owner().name, "worker1");
    EXPECT_EQ(++made.localValue(), 42);
    std::string wrongType = messageOf([&] { RRef<double>(made.coreHandle()).localValue(); });
    EXPECT_NE(wrongType.find("asks for a"), std::string::npos) << wrongType;
    // An owner's reference handed to a user is confirmed at once (registered before it left).
    RRef<Counter> got = agents[0]->rpcSync<RRef<Counter>>("worker1", "own", 3);
    EXPECT_FALSE(got.isOwner());
    EXPECT_TRUE(got.confirmedByOwner());
    EXPECT_EQ(got.toHere().value, 3);
    EXPECT_EQ(agents[1]->rrefStats().owned, 1u);
  }
  expectNoReferencesLeft(agents);
  shutdownAll(agents);
}

TEST(RRefTest, ReferencesPassedOnInEveryDirection) {
  auto agents = startWorkers(4, {}, registerAll);
  {
    RRef<std::vector<int>> numbers = agents[0]->remote<std::vector<int>>("worker1", "range", 10);
    // user -> another user (who fetches from the owner)
    EXPECT_EQ(agents[0]->rpcSync<int>("worker2", "sum", numbers), 45);
    // user -> owner: the owner gets its own value, not a fork
    EXPECT_TRUE(agents[0]->rpcSync<bool>("worker1", "isOwnerHere", numbers));
    EXPECT_EQ(agents[0]->rpcSync<int>("worker1", "sum", numbers), 45);
    // user -> user -> user, and to oneself
    EXPECT_EQ(agents[0]->rpcSync<int>("worker2", "forward", numbers, std::string("worker3")), 45);
    EXPECT_EQ(agents[0]->rpcSync<int>("worker0", "sum", numbers), 45);
    // owner -> user -> user
    RRef<std::vector<int>> local = agents[3]->makeRRef(std::vector<int>{1, 2, 3});
    EXPECT_EQ(agents[3]->rpcSync<int>("worker0", "forward", local, std::string("worker1")), 6);
    // Dropped right after the call that carried it: the callee still gets the value.
    Future<int> inFlight = agents[2]->rpcAsync<int>(
        "worker3", "sum", agents[2]->remote<std::vector<int>>("worker0", "range", 4));
    EXPECT_EQ(inFlight.value(), 6);
  }
  expectNoReferencesLeft(agents);
  shutdownAll(agents);
}

TEST(RRefTest, MethodsRunOnTheOwnersValue) {
  auto agents = startWorkers(3, {}, registerAll);
  {
    RRef<Counter> counter = agents[0]->remote<Counter>("worker1", "counter", 10);
    EXPECT_EQ(counter.rpcSync<int>("add", 5), 15);
    EXPECT_EQ(counter.rpcAsync<int>("add", 1).value(), 16);
    RRef<int> later = counter.remote<int>("get");
    EXPECT_EQ(later.owner().name, "worker1");
    EXPECT_EQ(later.toHere(), 16);
    // From a third worker that received the reference.
    agents[2]->registerFunction("bump", [](RRef<Counter> c) { return c.rpcSync<int>("add", 100); });
    EXPECT_EQ(agents[0]->rpcSync<int>("worker2", "bump", counter), 116);
    EXPECT_EQ(counter.toHere().value, 116);
    // A RemoteObject: methods work; copies are refused (at compile time through RRef<Account>,
    // at run time through a reference of another type).
    RRef<Account> account = agents[0]->remote<Account>("worker2", "account");
    EXPECT_EQ(account.rpcSync<int>("deposit", 20), 20);
    EXPECT_EQ(account.rpcSync<int>("deposit", 22), 42);
    std::string copy = messageOf([&] { RRef<int>(account.coreHandle()).toHere(); });
    EXPECT_NE(copy.find("cannot be copied off its owner"), std::string::npos) << copy;
  }
  expectNoReferencesLeft(agents);
  shutdownAll(agents);
}

TEST(RRefTest, CreationErrorsReachEveryFetch) {
  auto agents = startWorkers(3, {}, registerAll);
  {
    RRef<int> failed = agents[0]->remote<int>("worker1", "fail");
    std::string message = messageOf([&] { failed.toHere(); });
    EXPECT_NE(message.find("function 'fail' on worker 'worker1' (id 1) failed: no value today"),
              std::string::npos)
        << message;
    EXPECT_THROW(failed.toHere(), RemoteError);
    // The owner's value holds the error too: a third worker sees it.
    agents[2]->registerFunction("fetchInt", [](RRef<int> r) { return r.toHere(); });
    std::string third = messageOf([&] { agents[0]->rpcSync<int>("worker2", "fetchInt", failed); });
    EXPECT_NE(third.find("no value today"), std::string::npos) << third;
    std::string unknown = messageOf([&] { agents[0]->remote<int>("worker1", "nope").toHere(); });
    EXPECT_NE(unknown.find("unknown function 'nope' on worker 'worker1'"), std::string::npos)
        << unknown;
    std::string plainCall = messageOf([&] { agents[0]->rpcSync<int>("worker1", "account"); });
    EXPECT_NE(plainCall.find("call it with remote()"), std::string::npos) << plainCall;
    std::string selfFail = messageOf([&] { agents[0]->remote<int>("worker0", "fail").toHere(); });
    EXPECT_NE(selfFail.find("no value today"), std::string::npos) << selfFail;
    std::string noValue = messageOf([&] { agents[0]->remote<int>("worker1", "nothing").toHere(); });
    EXPECT_NE(noValue.find("remote() cannot hold its result"), std::string::npos) << noValue;
    EXPECT_THROW(agents[0]->remote<int>("worker9", "seven"), InvalidArgument);
    EXPECT_THROW(RRef<int>().toHere(), InvalidArgument);
    std::string reserved =
        messageOf([&] { agents[0]->registerFunction("c10d.mine", [] { return 1; }); });
    EXPECT_NE(reserved.find("keeps for its own functions"), std::string::npos) << reserved;
  }
  expectNoReferencesLeft(agents);
  shutdownAll(agents);
}

TEST(RRefTest, ManyReferencesFromManyThreadsLeaveNothingBehind) {
  RpcOptions options;
  options.threads = 8;
  auto agents = startWorkers(3, options, registerAll);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      RpcAgent& me = *agents[t];
      std::string owner = "worker" + std::to_string((t + 1) % 3);
      std::string third = "worker" + std::to_string((t + 2) % 3);
      for (int i = 0; i < 60; ++i) {
        RRef<std::vector<int>> r = me.remote<std::vector<int>>(owner, "range", i % 7);
        int expected = (i % 7) * (i % 7 - 1) / 2;
        if (me.rpcSync<int>(third, "sum", r) != expected) wrong++;
        if (i % 3 == 0 && r.toHere().size() != static_cast<size_t>(i % 7)) wrong++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  expectNoReferencesLeft(agents);
  shutdownAll(agents);
}

TEST(RRefTest, GracefulShutdownReleasesReferencesStillHeld) {
  auto agents = startWorkers(3, {}, registerAll);
  // Held across shutdown: every owner must still end with an empty table.
  RRef<int> a = agents[0]->remote<int>("worker1", "seven");
  RRef<Counter> b = agents[2]->rpcSync<RRef<Counter>>("worker0", "own", 1);
  RRef<std::vector<int>> c = agents[1]->remote<std::vector<int>>("worker2", "range", 3);
  EXPECT_EQ(agents[1]->rpcSync<int>("worker0", "sum", c), 3);
  shutdownAll(agents);
  for (const auto& agent : agents) {
    EXPECT_EQ(agent->rrefStats().owned, 0u) << agent->self().name;
  }
  std::string after = messageOf([&] { a.toHere(); });
  EXPECT_NE(after.find("shut down"), std::string::npos) << after;
}

}  // namespace
}  // namespace c10d::inline v1::rpc
