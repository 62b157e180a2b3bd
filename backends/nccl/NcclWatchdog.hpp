#pragma once

// Private to backends/nccl: the Work of an NCCL op, which completes when the CUDA event recorded
// after it fires, and the watchdog thread that completes them. The thread also polls
// ncclCommGetAsyncError and the ops' timeouts, and on either aborts the communicator and fails
// the pending Works with a message naming group, op and sequence number.
//
// Threading: the watchdog has no lock of its own. It shares NcclBackend's mutex, which guards the
// communicator, the Works in flight and the order ops are issued in; each member says whether it
// takes that mutex or expects it held. Works are completed outside it (Finished).

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends/nccl/NcclCommunicator.hpp"
#include "c10d/Work.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

class NcclWork : public Work {
 public:
  // done: the event recorded on the group's stream after the op, which the Work destroys.
  // keepAlive: the tensors the stream may still use. blockingWait: C10D_NCCL_BLOCKING_WAIT.
  NcclWork(const Op& op, std::shared_ptr<detail::GroupTrace> trace, std::vector<Tensor> outputs,
           std::vector<Tensor> keepAlive, cudaEvent_t done, bool blockingWait);
  ~NcclWork() override;

  void wait(std::chrono::milliseconds timeout) override;

  // True once the op's event has fired; error is then its failure (null: it succeeded). The
  // caller completes the Work with complete(), outside the backend's lock.
  bool ready(std::exception_ptr& error);
  void complete(const std::exception_ptr& error);
  // A receive's sender, known when the op starts (NCCL receives from one peer).
  using Work::setSourceRank;

  std::chrono::steady_clock::time_point deadline() const { return deadline_; }

 private:
  std::vector<Tensor> keepAlive_;  // inputs the stream may still read
  cudaEvent_t done_;
  bool blockingWait_;
  std::chrono::steady_clock::time_point deadline_;
};

namespace nccl {

class Watchdog {
 public:
  // Works the watchdog or shutdown found finished, with their errors: completed outside mutex,
  // since completing runs callbacks and a callback may issue the group's next op.
  using Finished = std::vector<std::pair<std::shared_ptr<NcclWork>, std::exception_ptr>>;

  // mutex guards communicator and this watchdog; both are the owner's and outlive it.
  Watchdog(std::mutex& mutex, Communicator& communicator);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts the thread, once the communicator exists. With mutex held, or before another thread
  // can reach the owner.
  void start();
  // An op just enqueued on the group's stream. With mutex held. Works are tracked in issue order,
  // the order the one stream runs them in, so the thread completes the leading ones whose events
  // fired and need not look further.
  void track(const std::shared_ptr<NcclWork>& work);
  // True once stop() was called: the owner is shut down. With mutex held.
  bool stopping() const { return stopping_; }
  // Takes mutex: stops the thread and joins it. True for the first call; later ones do nothing.
  bool stop();
  // After stop(), once the stream's ops are done: moves the Works whose events fired into
  // finished, and the others failed with StateError. With mutex held and the group's device
  // current.
  void drainLocked(Finished& finished);
  // After stop(), when the stream's ops did not finish: moves the Works whose events already
  // fired into finished, aborts the communicator, and fails the others with BackendError naming
  // reason. Their events may fire once the abort ends their kernels, but those ops did not
  // complete, so they must not be collected after it. Locking as drainLocked.
  void abortPendingLocked(const std::string& reason, Finished& finished);
  // Completes the Works in finished and empties it. Without mutex held.
  static void completeAll(Finished& finished);

 private:
  void watch();
  void abortLocked(const std::string& reason, const std::shared_ptr<NcclWork>& late,
                   Finished& finished);
  void collectReadyLocked(Finished& finished);

  std::mutex& mutex_;
  Communicator& communicator_;
  std::deque<std::shared_ptr<NcclWork>> inflight_;
  std::condition_variable changed_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace nccl

}  // namespace c10d::inline v1
