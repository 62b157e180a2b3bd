#include "backends/common/QueuedBackend.hpp"

#include "c10d/core/Exception.hpp"

namespace c10d::inline v0 {

QueuedBackend::QueuedBackend(std::string name, const BackendContext& context)
    : Backend(std::move(name), context.rank, context.size), groupName_(context.groupName) {}

QueuedBackend::~QueuedBackend() = default;

void QueuedBackend::startQueue() {
  queue_ =
      std::make_unique<OpQueue>(detail::concat(name(), " backend of group '", groupName_, "'"));
}

void QueuedBackend::shutdown() {
  std::lock_guard<std::mutex> guard(shutdownMutex_);
  if (!queue_ || shutDown_.exchange(true)) return;  // the constructor failed, or done already
  // The queue stays: other threads may be enqueueing now, and their ops fail cleanly.
  queue_->close();  // fails queued collectives, waits for the running one
  stopAfterQueue();
}

void QueuedBackend::checkNotShutDown(const char* op) const {
  C10D_CHECK(!shutDown_.load(), StateError, op, ": ", name(), " backend of group '", groupName_,
             "' was shut down");
}

void QueuedBackend::checkCPU(const Tensor& tensor, const char* op) const {
  C10D_CHECK(tensor.device().isCPU(), InvalidArgument, name(), " backend: ", op, " got ",
             tensor.describe(), "; it takes CPU tensors only");
}

uint64_t QueuedBackend::number(const char* op) {
  checkNotShutDown(op);
  return sequence_.fetch_add(1);
}

void QueuedBackend::queue(const std::shared_ptr<QueuedWork>& work) {
  queue_->enqueue(work);
}

std::shared_ptr<Work> QueuedBackend::send(const Tensor& tensor, int dstRank, int tag,
                                          std::chrono::milliseconds timeout) {
  return startP2P(true, tensor, dstRank, tag, timeout);
}

std::shared_ptr<Work> QueuedBackend::recv(const Tensor& tensor, int srcRank, int tag,
                                          std::chrono::milliseconds timeout) {
  return startP2P(false, tensor, srcRank, tag, timeout);
}

std::shared_ptr<Work> QueuedBackend::recvAnysource(const Tensor& tensor, int tag,
                                                   std::chrono::milliseconds timeout) {
  return startP2P(false, tensor, -1, tag, timeout);
}

std::vector<std::shared_ptr<Work>> QueuedBackend::batchIsendIrecv(
    const std::vector<P2POp>& ops, std::chrono::milliseconds timeout) {
  return postEachInTurn(ops, timeout);
}

}  // namespace c10d::inline v0
