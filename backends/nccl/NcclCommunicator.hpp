#pragma once

// Private to backends/nccl: a group's NCCL communicator and the stream its ops run on. It is made
// at the group's first op, on the device of its tensors, from a unique id that rank 0 publishes
// in the group's store (so a group that never touches a GPU never needs one), or taken from the
// parent group's ncclCommSplit; it is split for subgroups, aborted when the watchdog gives up on
// it (the group is unusable afterwards), and destroyed at shutdown.
//
// Threading: none of its own. NcclBackend calls every member with its mutex held (the watchdog
// thread too), or from its constructor before another thread can reach it; the mutex also keeps
// the order in which the group's ops reach the communicator. cancel() alone is for any thread,
// without the mutex: shutdown uses it to end an ensure() that waits for missing ranks.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "c10d/Backend.hpp"

namespace c10d::inline v1::nccl {

// What splitForSubgroup hands a member's new backend: its split communicator.
struct Split {
  ncclComm_t comm;
  int device;
};

class Communicator {
 public:
  // Takes the group's store, rank, size, timeout (for the unique id), name and local rank; makes
  // no communicator yet.
  explicit Communicator(const BackendContext& context);
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // "nccl backend of group '<group>' rank <rank>", how errors and logs name the group.
  std::string where() const;

  // Before each op: makes the communicator and its stream if there is none yet. onDevice is the
  // device of the op's tensors, negative for an op without any (the group's device, or
  // defaultDevice before there is one). Throws BackendError once aborted, InvalidArgument when
  // onDevice is not the group's device. Making it waits (awaitEveryRank) until every rank of the
  // group has come to make it too: TimeoutError naming the ranks that did not within the group's
  // timeout, StateError when cancel() ends the wait. True when it made the communicator just now:
  // the caller then starts the watchdog.
  [[nodiscard]] bool ensure(int onDevice);
  // Ends a wait of ensure() (from any thread, without the mutex); later ones fail at once.
  void cancel() { cancelled_.store(true); }
  // A subgroup's backend, at construction: the communicator its parent split off for it.
  void adopt(const Split& fromParent);
  // Called on every rank of this group (ncclCommSplit is collective). A member of the subgroup
  // of ranksInParent gets its split communicator; null for the others, and for every rank while
  // this group has no communicator.
  std::shared_ptr<Split> split(const std::vector<int>& ranksInParent);
  // Aborts the communicator, so NCCL gives up on its pending work; reason (the first one given)
  // is what later ops are refused with.
  void abort(const std::string& reason);
  // At shutdown: waits for the stream's ops. Empty once they are done; otherwise why they never
  // will be: not done by deadline, NCCL reported an asynchronous error (a peer died mid-op), or
  // the stream failed. The caller then aborts instead of destroying, since ncclCommDestroy would
  // wait for them too.
  std::string awaitStream(std::chrono::steady_clock::time_point deadline);
  // At shutdown, once the stream's ops are done: destroys the communicator (a failure is only
  // logged) and the stream.
  void destroy();

  ncclComm_t comm() const { return comm_; }  // null before the first op and once aborted
  int device() const { return device_; }     // -1 before the first op
  cudaStream_t stream() const { return stream_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& group() const { return group_; }

 private:
  int defaultDevice() const;
  void createStream();
  // The unique id rank 0 published, once every rank has come to make the communicator.
  ncclUniqueId exchangeUniqueId();

  std::shared_ptr<Store> store_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::string group_;
  int localRank_;

  ncclComm_t comm_ = nullptr;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  std::string brokenBy_;
  std::atomic<bool> cancelled_{false};
};

// Marks rank as arrived under prefix in store (the key prefix + rank), then waits until every
// rank of [0, size) has, checking cancelled between slices of the wait so another thread can end
// it. Throws TimeoutError naming the ranks that never arrived by deadline, StateError once
// cancelled; what() names the waiter in both.
void awaitEveryRank(Store& store, const std::string& prefix, int rank, int size,
                    std::chrono::steady_clock::time_point deadline,
                    const std::atomic<bool>& cancelled, const std::function<std::string()>& what);

}  // namespace c10d::inline v1::nccl
