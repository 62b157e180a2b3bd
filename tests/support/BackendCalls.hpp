#pragma once

// Ops made straight on a Backend, without a ProcessGroup (in-process tests of a backend, its
// algorithms, or HostStagingBackend): the calls ProcessGroup would make, each an Op numbered by
// this object (the group's sequence) and started with Backend::start. Arguments are not
// validated: ProcessGroup's checks are not here.

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "c10d/Backend.hpp"
#include "c10d/Options.hpp"

namespace c10d::inline v1::test {

class BackendCalls {
 public:
  // defaultTimeout: the group's, for options that leave it unset.
  BackendCalls(std::shared_ptr<Backend> backend, std::chrono::milliseconds defaultTimeout)
      : backend_(std::move(backend)), defaultTimeout_(defaultTimeout) {}

  Backend& backend() { return *backend_; }
  int rank() const { return backend_->rank(); }
  int size() const { return backend_->size(); }
  void shutdown() { backend_->shutdown(); }

  std::shared_ptr<Work> broadcast(const Tensor& tensor, const BroadcastOptions& options) {
    Op op = Op::on(OpType::Broadcast, tensor, options.timeout);
    op.root = options.rootRank;
    return start(op, {.input = &tensor});
  }
  std::shared_ptr<Work> allreduce(const Tensor& tensor, const AllreduceOptions& options) {
    Op op = Op::on(OpType::Allreduce, tensor, options.timeout);
    op.reduceOp = options.reduceOp;
    return start(op, {.input = &tensor});
  }
  std::shared_ptr<Work> reduce(const Tensor& tensor, const ReduceOptions& options) {
    Op op = Op::on(OpType::Reduce, tensor, options.timeout);
    op.reduceOp = options.reduceOp;
    op.root = options.rootRank;
    return start(op, {.input = &tensor});
  }
  std::shared_ptr<Work> allgather(const std::vector<Tensor>& outputs, const Tensor& input,
                                  const AllgatherOptions& options) {
    Op op = Op::on(OpType::Allgather, input, options.timeout);
    return start(op, {.input = &input, .outputs = &outputs});
  }
  std::shared_ptr<Work> allgatherIntoTensor(const Tensor& output, const Tensor& input,
                                            const AllgatherOptions& options) {
    Op op = Op::on(OpType::AllgatherIntoTensor, input, options.timeout);
    return start(op, {.input = &input, .output = &output});
  }
  std::shared_ptr<Work> gather(const std::vector<Tensor>& outputs, const Tensor& input,
                               const GatherOptions& options) {
    Op op = Op::on(OpType::Gather, input, options.timeout);
    op.root = options.rootRank;
    return start(op, {.input = &input, .outputs = &outputs});
  }
  std::shared_ptr<Work> scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                const ScatterOptions& options) {
    Op op = Op::on(OpType::Scatter, output, options.timeout);
    op.root = options.rootRank;
    return start(op, {.output = &output, .inputs = &inputs});
  }
  std::shared_ptr<Work> reduceScatterTensor(const Tensor& output, const Tensor& input,
                                            const ReduceScatterOptions& options) {
    Op op = Op::on(OpType::ReduceScatterTensor, output, options.timeout);
    op.reduceOp = options.reduceOp;
    return start(op, {.input = &input, .output = &output});
  }
  std::shared_ptr<Work> alltoallBase(const Tensor& output, const Tensor& input,
                                     const std::vector<int64_t>& outputSplits,
                                     const std::vector<int64_t>& inputSplits,
                                     const AllToAllOptions& options) {
    Op op = Op::on(OpType::AlltoallBase, input, options.timeout);
    if (!outputSplits.empty() || !inputSplits.empty()) op.count = 0;
    return start(op, {.input = &input,
                      .output = &output,
                      .inputSplits = &inputSplits,
                      .outputSplits = &outputSplits});
  }
  std::shared_ptr<Work> barrier(const BarrierOptions& options) {
    Op op;
    op.type = OpType::Barrier;
    op.timeout = options.timeout;
    return start(op, {});
  }
  std::shared_ptr<Work> send(const Tensor& tensor, int peer, int tag,
                             std::chrono::milliseconds timeout) {
    return pointToPoint(OpType::Send, tensor, peer, tag, timeout);
  }
  std::shared_ptr<Work> recv(const Tensor& tensor, int peer, int tag,
                             std::chrono::milliseconds timeout) {
    return pointToPoint(OpType::Recv, tensor, peer, tag, timeout);
  }
  std::shared_ptr<Work> recvAnysource(const Tensor& tensor, int tag,
                                      std::chrono::milliseconds timeout) {
    return pointToPoint(OpType::RecvAnysource, tensor, -1, tag, timeout);
  }
  std::vector<std::shared_ptr<Work>> batchIsendIrecv(const std::vector<P2POp>& ops,
                                                     std::chrono::milliseconds timeout) {
    std::vector<Op> described;
    for (const P2POp& p2p : ops) {
      Op op = Op::on(p2p.kind == P2POp::Send ? OpType::Send : OpType::Recv, p2p.tensor,
                     timeout == kDefaultTimeout ? defaultTimeout_ : timeout);
      op.peer = p2p.peer;
      op.tag = p2p.tag;
      op.seq = pointToPoint_++;
      described.push_back(op);
    }
    return backend_->startBatch(described, ops);
  }

 private:
  std::shared_ptr<Work> start(Op& op, const OpTensors& tensors) {
    op.seq = collectives_++;
    if (op.timeout == kDefaultTimeout) op.timeout = defaultTimeout_;
    return backend_->start(op, tensors);
  }
  std::shared_ptr<Work> pointToPoint(OpType type, const Tensor& tensor, int peer, int tag,
                                     std::chrono::milliseconds timeout) {
    Op op = Op::on(type, tensor, timeout == kDefaultTimeout ? defaultTimeout_ : timeout);
    op.peer = peer;
    op.tag = tag;
    op.seq = pointToPoint_++;
    return backend_->start(op, {.input = &tensor});
  }

  std::shared_ptr<Backend> backend_;
  std::chrono::milliseconds defaultTimeout_;
  std::atomic<uint64_t> collectives_{0};
  std::atomic<uint64_t> pointToPoint_{0};
};

}  // namespace c10d::inline v1::test
