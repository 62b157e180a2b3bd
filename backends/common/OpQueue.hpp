#pragma once

// The order in which a backend runs its collectives (Gloo, MPI): one at a time, in issue order,
// on the first thread that waits for the op next in line, or on one of the process's op workers
// (OpWorkers.hpp, shared by every queue) for ops nobody is waiting for. A blocking call (op,
// then wait) so runs on its own thread with no hand-off, no lock and no wake-up of a worker.
//
// The workers learn of an op only when one must run it: when the op's caller shows it will not
// wait for it now (asks for its Future, polls it, waits less than its timeout: Work::startAsync),
// when an op is issued behind one still waiting to start or after one a worker had to run
// (async use: the ops of a caller that issues ahead start at once), when the op next in line is
// left over by whoever ran the one before it, or when the queue is parked. Otherwise a worker
// looks at the queue now and then while ops flow (from every 1 ms, doubling to every 16 ms while
// callers claim their own ops) and runs an op it finds waiting at two looks in a row; once ops
// stop the queue is parked until an op wakes the workers.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "c10d/Backend.hpp"
#include "c10d/Work.hpp"

namespace c10d::inline v1 {

class OpQueue;

// A Work whose op runs later, in issue order (see OpQueue). It keeps the op's tensors alive
// until it completes; a backend derives from it and says how the op runs (run()).
class QueuedWork : public Work {
 public:
  QueuedWork(const Op& op, std::shared_ptr<detail::GroupTrace> trace, const OpTensors& tensors);

  // Keeps the op's tensors (as start() got them) for its run.
  void capture(const OpTensors& tensors);
  // The op's tensors, as start() got them.
  OpTensors tensors() const;

 protected:
  // A Work to be rebound to each op it runs (c10d/WorkPool.hpp).
  explicit QueuedWork(std::shared_ptr<detail::GroupTrace> trace);
  // Runs the op on the thread that claimed it; throws the op's error.
  virtual void run() = 0;
  void beforeWait() override;
  void startAsync() const override;
  void rebind(const Op& op) override;
  void recycle() override;

 private:
  friend class OpQueue;
  template <typename T>
  friend class detail::WorkPool;
  struct QueueState;
  // The op's tensors: its outputs are the Work's (result()), the rest are kept here.
  Tensor input_;
  std::vector<Tensor> inputs_;
  std::vector<int64_t> inputSplits_, outputSplits_;
  bool inPlace_ = false;  // input_ is the output (allreduce_coalesced: inputs_ are the outputs)
  std::shared_ptr<QueueState> queue_;
  uint64_t position_ = 0;
  std::shared_ptr<QueuedWork> self_;  // while queued: the caller may drop its Work
};

// Runs QueuedWorks one at a time in enqueue order, so the collectives of a group hit the wire in
// the order the caller issued them on every rank. Thread-safe. The destructor leaves the
// workers and fails whatever has not run with the error given to abort() (or a shutdown error).
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
  // running operation has finished and no worker serves the queue. Idempotent, and a backend's
  // shutdown may race other threads' enqueues (they fail cleanly); a second close() racing the
  // first may return before the running operation has finished (QueuedBackend::shutdown
  // serialises its own).
  void close();

 private:
  std::shared_ptr<QueuedWork::QueueState> state_;
  std::atomic<bool> removed_{false};  // from the process's workers (OpWorkers.hpp)
};

}  // namespace c10d::inline v1
