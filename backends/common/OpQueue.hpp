#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "c10d/Work.hpp"

namespace c10d::inline v0 {

class OpQueue;

// A Work whose operation runs later, in issue order: on the queue's worker thread, or on the
// first thread that waits for it when it is next in line and the worker is idle. The second path
// is what makes a blocking call (op then wait) cost no thread hand-off; the worker leaves a new
// op to its caller for a while (see kBlockingCallerGrace) before taking it.
class QueuedWork : public Work {
 public:
  // run gets this Work (for its description): capturing a copy of the description instead cost
  // several allocations per op.
  QueuedWork(Describe describe, std::chrono::milliseconds timeout, std::vector<Tensor> outputs,
             std::function<void(QueuedWork&)> run);

 protected:
  void beforeWait() override;

 private:
  friend class OpQueue;
  struct QueueState;
  std::function<void(QueuedWork&)> run_;  // throws the operation's error; released after running
  std::shared_ptr<QueueState> queue_;
  // When the worker first saw it pending (its caller's grace counts from there).
  std::chrono::steady_clock::time_point firstSeen_;
};

// Runs QueuedWork one at a time in enqueue order, so the collectives of a group hit the wire in
// the order the caller issued them on every rank. Thread-safe. The destructor stops the worker
// and fails whatever has not run with the error given to abort() (or a shutdown error).
class OpQueue {
 public:
  explicit OpQueue(std::string name);
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  void enqueue(const std::shared_ptr<QueuedWork>& work);
  // Fails every queued operation with error and every later enqueue too. Running ones finish.
  void abort(std::exception_ptr error);
  // Fails what is queued and every later enqueue with a shutdown error, and returns once the
  // running operation has finished and the worker has stopped. Idempotent and thread-safe, so a
  // backend's shutdown may race other threads' enqueues (they fail cleanly).
  void close();

 private:
  std::shared_ptr<QueuedWork::QueueState> state_;
  std::mutex joinMutex_;
  std::thread worker_;
};

}  // namespace c10d::inline v0
