#pragma once

// Ranks as threads of the test process, each with its own Gloo backend over one HashStore, for
// in-process tests that ThreadSanitizer can follow (forked ranks: MultiProcess.hpp).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "c10d/Backend.hpp"
#include "c10d/ProcessGroup.hpp"
#include "store/HashStore.hpp"
#include "store/PrefixStore.hpp"

namespace c10d::inline v1::test {

// Runs body(rank, backend) on size threads, each with a Gloo backend of group name whose default
// timeout is timeout (and configOf(rank) as its ProcessGroupOptions::config when given), and
// shuts the backends down after. A rank that throws fails the test
// with its rank and message.
inline void onGlooThreadRanks(
    int size, std::chrono::milliseconds timeout, const std::string& name,
    const std::function<void(int, std::shared_ptr<Backend>)>& body,
    const std::function<std::map<std::string, std::string>(int)>& configOf = nullptr) {
  auto store = std::make_shared<HashStore>();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        BackendContext context{
            std::make_shared<PrefixStore>(name, store), rank, size, timeout, name, nullptr};
        if (configOf) context.settings = config::Settings(configOf(rank));
        std::shared_ptr<Backend> gloo = createBackend("gloo", context);
        body(rank, gloo);
        gloo->shutdown();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << rank << ": " << e.what();
        failures++;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

// Runs body(group) on size ranks, each a thread with its own Gloo process group over one
// HashStore, and returns each rank's error message ("" when body returned).
inline std::vector<std::string> errorsOnThreadRanks(
    int size, std::chrono::milliseconds timeout, const std::function<void(ProcessGroup&)>& body) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errors(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        ProcessGroup group(store, rank, size, ProcessGroupOptions{.timeout = timeout});
        body(group);
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return errors;
}

}  // namespace c10d::inline v1::test
