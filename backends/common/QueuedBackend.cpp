#include "backends/common/QueuedBackend.hpp"

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

QueuedBackend::QueuedBackend(std::string name, const BackendContext& context)
    : Backend(std::move(name), context.rank, context.size),
      groupName_(context.groupName),
      trace_(context.trace) {}

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

void QueuedBackend::checkNotShutDown(const Op& op) const {
  C10D_CHECK(!shutDown_.load(std::memory_order_relaxed), StateError, c10d::name(op.type), ": ",
             name(), " backend of group '", groupName_, "' was shut down");
}

std::shared_ptr<Work> QueuedBackend::start(const Op& op, const OpTensors& tensors) {
  C10D_CHECK(op.device == DeviceType::CPU || op.ndim == Op::kNoTensor, InvalidArgument, name(),
             " backend: ", describe(op), ": it takes CPU tensors only");
  if (!op.traits().collective) return startP2P(op, *tensors.input);
  checkNotShutDown(op);
  std::shared_ptr<QueuedWork> work = makeCollective(op, tensors);
  queue_->enqueue(work);
  return work;
}

std::vector<std::shared_ptr<Work>> QueuedBackend::startBatch(const std::vector<Op>& ops,
                                                             const std::vector<P2POp>& p2p) {
  std::vector<std::shared_ptr<Work>> works;
  works.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) works.push_back(start(ops[i], {.input = &p2p[i].tensor}));
  return works;
}

}  // namespace c10d::inline v1
