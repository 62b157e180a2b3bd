#pragma once

// Agents on threads of one test process, over a shared HashStore and loopback TCP.

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rpc/RpcAgent.hpp"
#include "store/HashStore.hpp"

namespace c10d::inline v1::rpc::test {

// worldSize agents named worker<rank>, created together (create() returns once all are
// connected); setup runs on each before the set-up barrier.
inline std::vector<std::shared_ptr<RpcAgent>> startWorkers(
    int worldSize, RpcOptions options = {}, const std::function<void(RpcAgent&)>& setup = nullptr) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::shared_ptr<RpcAgent>> agents(worldSize);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int rank = 0; rank < worldSize; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        agents[rank] = RpcAgent::create(store, "worker" + std::to_string(rank), rank, worldSize,
                                        options, setup);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "worker " << rank << ": " << e.what();
        failures++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  return agents;
}

inline void shutdownAll(std::vector<std::shared_ptr<RpcAgent>>& agents) {
  std::vector<std::thread> threads;
  for (auto& agent : agents) {
    threads.emplace_back([agent] { agent->shutdown(true); });
  }
  for (auto& t : threads) t.join();
}

inline std::string messageOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace c10d::inline v1::rpc::test
