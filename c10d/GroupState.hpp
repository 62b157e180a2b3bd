#pragma once

// Private to the files of ProcessGroup (c10d/ProcessGroup*.cpp, c10d/Subgroups.cpp,
// c10d/MonitoredBarrier.cpp), never installed: a group's data, behind the one pointer the public
// class holds, so that a field added here changes neither c10d/ProcessGroup.hpp nor the ABI.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "c10d/Backend.hpp"
#include "c10d/GroupTrace.hpp"
#include "c10d/Op.hpp"
#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1::detail {

struct GroupState {
  GroupState(std::shared_ptr<Store> store, int rank, int size, ProcessGroupOptions options)
      : store(std::move(store)), rank(rank), size(size), options(std::move(options)) {}

  std::shared_ptr<Store> store;
  int rank;
  int size;
  ProcessGroupOptions options;
  bool member = true;
  std::atomic<bool> shutdown{false};
  std::string retiredBecause;  // set before shutdown by retire; read after it
  // The groups made from this one, for retire.
  std::mutex subgroupsMutex;
  std::vector<std::weak_ptr<ProcessGroup>> subgroups;
  std::vector<int> globalRanks;
  std::map<DeviceType, std::shared_ptr<Backend>> backends;
  // What ops on each device type go to: the backend, or a HostStagingBackend over it; and the
  // same as plain pointers by DeviceType, which every op reads.
  std::map<DeviceType, std::shared_ptr<Backend>> routes;
  std::array<Backend*, 2> routed{};
  // Threads may create subgroups (each call is collective, so the order is the program's).
  std::atomic<uint64_t> subgroupCounter{0};
  // The group's identity, flight recorder and C10D_DEBUG level, shared with every Work.
  std::shared_ptr<GroupTrace> trace;
  bool debugDetail = false;  // C10D_DEBUG=DETAIL
  // The numbers of the next collective (the group's sequence, the same on every rank) and of
  // this rank's next point-to-point op.
  std::atomic<uint64_t> collectives{0};
  std::atomic<uint64_t> pointToPoint{0};
  // Every op pays for the count: a slot per op type, relaxed atomics.
  std::array<std::atomic<uint64_t>, kOpTypes> trafficCalls{};
  std::array<std::atomic<uint64_t>, kOpTypes> trafficBytes{};
};

}  // namespace c10d::inline v1::detail

namespace c10d::inline v1 {

inline std::chrono::milliseconds ProcessGroup::resolve(std::chrono::milliseconds timeout,
                                                       const char* op) const {
  return timeout == kDefaultTimeout ? state_->options.timeout : resolveGiven(timeout, op);
}

}  // namespace c10d::inline v1
