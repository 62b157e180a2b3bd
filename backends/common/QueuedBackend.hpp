#pragma once

// What every backend built on the op queue shares (Gloo, MPI): collectives numbered and run in
// issue order (OpQueue), point-to-point calls funnelled into one startP2P, and a shutdown that
// may race itself and other threads' calls. A backend writes only how its ops run.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/common/Describe.hpp"
#include "backends/common/OpQueue.hpp"
#include "c10d/Backend.hpp"

namespace c10d::inline v0 {

class QueuedBackend : public Backend {
 public:
  // Each posts the op at once (posting never blocks): starting ops in turn starts them together.
  std::shared_ptr<Work> send(const Tensor& tensor, int dstRank, int tag,
                             std::chrono::milliseconds timeout) final;
  std::shared_ptr<Work> recv(const Tensor& tensor, int srcRank, int tag,
                             std::chrono::milliseconds timeout) final;
  std::shared_ptr<Work> recvAnysource(const Tensor& tensor, int tag,
                                      std::chrono::milliseconds timeout) final;
  std::vector<std::shared_ptr<Work>> batchIsendIrecv(const std::vector<P2POp>& ops,
                                                     std::chrono::milliseconds timeout) final;
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
  void checkNotShutDown(const char* op) const;
  // InvalidArgument for a tensor that is not on the CPU.
  void checkCPU(const Tensor& tensor, const char* op) const;
  // Numbers the collective (its sequence number in this group), describes it (details runs only
  // when a description is needed) and queues run(work, sequence). A template, so that run is
  // wrapped in one std::function, not two: the second allocation cost 4 B ops tens of ns.
  template <typename Run>
  std::shared_ptr<Work> enqueue(const char* op, std::function<std::string()> details,
                                std::chrono::milliseconds timeout, std::vector<Tensor> outputs,
                                Run run) {
    const uint64_t sequence = number(op);
    auto work = std::make_shared<QueuedWork>(
        describeCollective(op, std::move(details), groupName_, sequence), timeout,
        std::move(outputs),
        [sequence, run = std::move(run)](QueuedWork& self) { run(self, sequence); });
    queue(work);
    return work;
  }
  // peer < 0: a receive from any source.
  virtual std::shared_ptr<Work> startP2P(bool isSend, const Tensor& tensor, int peer, int tag,
                                         std::chrono::milliseconds timeout) = 0;
  const std::string& groupName() const { return groupName_; }

 private:
  // checkNotShutDown(op), then the next sequence number.
  uint64_t number(const char* op);
  void queue(const std::shared_ptr<QueuedWork>& work);

  std::string groupName_;
  std::unique_ptr<OpQueue> queue_;  // made by startQueue, kept until destruction
  std::mutex shutdownMutex_;        // shutdown() may race itself (the destructor, a user)
  std::atomic<bool> shutDown_{false};
  std::atomic<uint64_t> sequence_{0};
};

}  // namespace c10d::inline v0
