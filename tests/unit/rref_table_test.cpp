// One worker's table of remote references (rpc/RRefTable.hpp), without sockets or peers: the
// bookkeeping the RRef protocol relies on (rref_test runs the protocol itself across workers).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "rpc/RRefTable.hpp"

namespace c10d::inline v1::rpc::detail {
namespace {

using namespace std::chrono_literals;

// Cores without an agent: destroying one sends nothing.
std::shared_ptr<RRefCore> ownerCore(uint64_t local) {
  return std::make_shared<RRefCore>(std::weak_ptr<RpcAgent>(), GlobalId{0, local}, 0);
}
std::shared_ptr<RRefCore> userCore(uint64_t local, uint64_t fork) {
  return std::make_shared<RRefCore>(std::weak_ptr<RpcAgent>(), GlobalId{0, local},
                                    GlobalId{1, fork}, 0);
}

TEST(RRefTable, AnOwnedValueStaysUntilItsLastForkIsDeleted) {
  RRefTable table;
  auto core = ownerCore(1);
  table.addFork(core, {1, 10});
  table.addFork(core, {2, 20});
  EXPECT_EQ(table.owned(core->id()), core);
  EXPECT_EQ(table.stats().owned, 1u);
  EXPECT_EQ(table.deleteFork(core->id(), {1, 10}), nullptr) << "a fork is still held";
  EXPECT_EQ(table.owned(core->id()), core);
  EXPECT_EQ(table.deleteFork(core->id(), {2, 20}), core) << "the last fork returns the core";
  EXPECT_EQ(table.owned(core->id()), nullptr);
  EXPECT_EQ(table.deleteFork(core->id(), {2, 20}), nullptr) << "deleting twice is harmless";
  EXPECT_EQ(table.stats().owned, 0u);
}

TEST(RRefTable, OwnedOrMakeMakesAnEntryOnce) {
  RRefTable table;
  int made = 0;
  auto make = [&] {
    ++made;
    return ownerCore(7);
  };
  auto first = table.ownedOrMake({0, 7}, make);
  auto second = table.ownedOrMake({0, 7}, make);
  EXPECT_EQ(first, second);
  EXPECT_EQ(made, 1);
}

TEST(RRefTable, APendingUserIsHeldUntilConfirmedThenHeldWeakly) {
  RRefTable table;
  std::weak_ptr<RRefCore> weak;
  {
    auto core = userCore(3, 30);
    weak = core;
    table.addPendingUser(core);
  }
  EXPECT_FALSE(weak.expired()) << "the table keeps an unconfirmed fork alive";
  EXPECT_EQ(table.stats().pendingUsers, 1u);
  std::shared_ptr<RRefCore> confirmed = table.confirmUser({1, 30});
  ASSERT_NE(confirmed, nullptr);
  EXPECT_TRUE(confirmed->confirmed());
  EXPECT_EQ(table.stats().pendingUsers, 0u);
  EXPECT_EQ(table.stats().users, 1u);
  confirmed.reset();
  EXPECT_TRUE(weak.expired()) << "a confirmed fork lives only as long as its handles";
  EXPECT_EQ(table.stats().users, 0u);
  EXPECT_EQ(table.confirmUser({1, 30}), nullptr) << "confirming twice finds nothing";
}

TEST(RRefTable, SettleWaitsForForksInFlightAndHandsOverTheLiveUsers) {
  RRefTable table;
  auto live = userCore(4, 40);
  table.addUser(live);
  table.addPendingChild({0, 50}, ownerCore(5));
  std::thread accept([&] {
    std::this_thread::sleep_for(100ms);
    table.takePendingChild({0, 50});
  });
  auto start = std::chrono::steady_clock::now();
  RRefTable::Settled settled = table.settle(start + 30s);
  accept.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "the acceptance did not wake it";
  EXPECT_EQ(settled.pendingChildren, 0u);
  ASSERT_EQ(settled.liveUsers.size(), 1u);
  EXPECT_EQ(settled.liveUsers[0], live);
  EXPECT_EQ(table.stats().users, 0u) << "settle hands the users over";
}

TEST(RRefTable, SettleGivesUpAtTheDeadlineAndCountsWhatIsStillInFlight) {
  RRefTable table;
  table.addPendingUser(userCore(6, 60));
  table.addPendingChild({0, 70}, ownerCore(7));
  auto start = std::chrono::steady_clock::now();
  RRefTable::Settled settled = table.settle(start + 150ms);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 150ms);
  EXPECT_EQ(settled.pendingUsers, 1u);
  EXPECT_EQ(settled.pendingChildren, 1u);
  EXPECT_EQ(table.clear().cores.size(), 2u);
  RRefStats after = table.stats();
  EXPECT_EQ(after.pendingUsers + after.pendingChildren + after.owned, 0u);
}

}  // namespace
}  // namespace c10d::inline v1::rpc::detail
