#pragma once

// What every backend built on the op queue shares (Gloo, MPI): collectives run in issue order
// (OpQueue), point-to-point calls funnelled into one startP2P, and a shutdown that may race
// itself and other threads' calls. A backend writes only how its ops run.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/common/OpQueue.hpp"
#include "c10d/Backend.hpp"

namespace c10d::inline v1 {

class QueuedBackend : public Backend {
 public:
  // A collective joins the queue as the Work makeCollective makes; a point-to-point op goes to
  // startP2P (posting never blocks).
  std::shared_ptr<Work> start(const Op& op, const OpTensors& tensors) final;
  // Each posted in turn (posting never blocks): starting ops in turn starts them together.
  std::vector<std::shared_ptr<Work>> startBatch(const std::vector<Op>& ops,
                                                const std::vector<P2POp>& p2p) final;
  // Refuses new ops (StateError), fails the queued ones with StateError, waits for the running
  // one, then stopAfterQueue(). Idempotent; safe to call from several threads at once. The
  // derived destructor calls it, while what stopAfterQueue stops still exists.
  void shutdown() final;

 protected:
  QueuedBackend(std::string name, const BackendContext& context);
  ~QueuedBackend() override;

  // The last step of the derived constructor: a backend whose set-up threw has no queue, and
  // shutdown() then has nothing to stop.
  void startQueue();
  virtual void stopAfterQueue() {}
  // StateError "<op>: <name> backend of group '<group>' was shut down".
  void checkNotShutDown(const Op& op) const;
  // The Work of collective op, whose run() runs it (on whichever thread claims it).
  virtual std::shared_ptr<QueuedWork> makeCollective(const Op& op, const OpTensors& tensors) = 0;
  // Queues work of the backend's own (not one of ProcessGroup's ops), in issue order with them.
  void enqueueInternal(const std::shared_ptr<QueuedWork>& work) { queue_->enqueue(work); }
  // op is a send, recv or recv_anysource (op.peer -1) of tensor.
  virtual std::shared_ptr<Work> startP2P(const Op& op, const Tensor& tensor) = 0;
  const std::string& groupName() const { return groupName_; }
  // What this backend's Works report to (BackendContext::trace).
  const std::shared_ptr<detail::GroupTrace>& trace() const { return trace_; }

 private:
  std::string groupName_;
  std::shared_ptr<detail::GroupTrace> trace_;
  std::unique_ptr<OpQueue> queue_;  // made by startQueue, kept until destruction
  std::mutex shutdownMutex_;        // shutdown() may race itself (the destructor, a user)
  std::atomic<bool> shutDown_{false};
};

}  // namespace c10d::inline v1
