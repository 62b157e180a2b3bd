#include "c10d/HostStaging.hpp"

#include <utility>

#include "c10d/core/Cuda.hpp"

namespace c10d::inline v0 {

namespace {

// The caller's Work for a staged op. Waiting on it waits on the inner op first, so a queued
// inner op still runs on the waiting thread (see QueuedWork) instead of costing a hand-off, and
// the copy back then runs there too.
class StagedWork : public Work {
 public:
  StagedWork(std::shared_ptr<Work> inner, std::vector<Tensor> outputs)
      : Work([inner] { return inner->description(); }, inner->timeout(), std::move(outputs)),
        inner_(std::move(inner)) {}

  void wait(std::chrono::milliseconds timeout) override {
    inner_->wait(timeout);
    Work::wait(timeout);
  }

 private:
  std::shared_ptr<Work> inner_;
};

}  // namespace

// The host side of one op: host copies of its device inputs, host buffers for its device
// outputs, and the copies back that complete the op's Work.
class HostStagingBackend::Staging {
 public:
  explicit Staging(const Copy& copy) : copy_(copy) {}

  // A host copy of tensor's data (tensor itself when it is already on the host).
  Tensor in(const Tensor& tensor) {
    if (tensor.device().isCPU()) return tensor;
    Tensor host = Tensor::empty(tensor.sizes(), tensor.dtype());
    copy_(host, tensor);
    return host;
  }
  // A host buffer whose contents go back to tensor when the op has succeeded.
  Tensor out(const Tensor& tensor) {
    if (tensor.device().isCPU()) return tensor;
    Tensor host = Tensor::empty(tensor.sizes(), tensor.dtype());
    back_.emplace_back(tensor, host);
    return host;
  }
  // Both: in-place ops.
  Tensor inOut(const Tensor& tensor) {
    if (tensor.device().isCPU()) return tensor;
    Tensor host = in(tensor);
    back_.emplace_back(tensor, host);
    return host;
  }
  std::vector<Tensor> in(const std::vector<Tensor>& tensors) { return map(tensors, &Staging::in); }
  std::vector<Tensor> out(const std::vector<Tensor>& tensors) {
    return map(tensors, &Staging::out);
  }
  std::vector<Tensor> inOut(const std::vector<Tensor>& tensors) {
    return map(tensors, &Staging::inOut);
  }

  // The caller's Work: completes once inner has and the outputs are back on the device.
  std::shared_ptr<Work> finish(const std::shared_ptr<Work>& inner) {
    if (back_.empty()) return inner;
    std::vector<Tensor> outputs;
    outputs.reserve(back_.size());
    for (const auto& [device, host] : back_) outputs.push_back(device);
    auto outer = std::make_shared<StagedWork>(inner, std::move(outputs));
    // The callback holds inner (for its source rank) and outer (the copy back must happen even
    // when the caller dropped its Work) until it has run: inner always completes, by its
    // timeout at the latest, and the future drops its callbacks then.
    inner->getFuture()->addCallback(
        [inner, outer, back = std::move(back_), copy = copy_](Future& future) {
          if (future.hasError()) {
            outer->finishWithError(future.error());
            return;
          }
          try {
            for (const auto& [device, host] : back) copy(device, host);
            if (inner->hasSourceRank()) outer->setSourceRank(inner->sourceRank());
            outer->finish();
          } catch (...) {
            outer->finishWithError(std::current_exception());
          }
        });
    return outer;
  }

 private:
  std::vector<Tensor> map(const std::vector<Tensor>& tensors,
                          Tensor (Staging::*one)(const Tensor&)) {
    std::vector<Tensor> result;
    result.reserve(tensors.size());
    for (const Tensor& tensor : tensors) result.push_back((this->*one)(tensor));
    return result;
  }

  const Copy& copy_;
  std::vector<std::pair<Tensor, Tensor>> back_;  // (device tensor, host buffer)
};

HostStagingBackend::HostStagingBackend(std::shared_ptr<Backend> inner, Copy copy)
    : Backend(inner->name(), inner->rank(), inner->size()),
      inner_(std::move(inner)),
      copy_(copy ? std::move(copy) : Copy(copyTensor)) {}

std::shared_ptr<Work> HostStagingBackend::broadcast(const Tensor& tensor,
                                                    const BroadcastOptions& options) {
  Staging s(copy_);
  return s.finish(inner_->broadcast(s.inOut(tensor), options));
}

std::shared_ptr<Work> HostStagingBackend::allreduce(const Tensor& tensor,
                                                    const AllreduceOptions& options) {
  Staging s(copy_);
  return s.finish(inner_->allreduce(s.inOut(tensor), options));
}

std::shared_ptr<Work> HostStagingBackend::allreduceCoalesced(const std::vector<Tensor>& tensors,
                                                             const AllreduceOptions& options) {
  Staging s(copy_);
  return s.finish(inner_->allreduceCoalesced(s.inOut(tensors), options));
}

std::shared_ptr<Work> HostStagingBackend::reduce(const Tensor& tensor,
                                                 const ReduceOptions& options) {
  Staging s(copy_);
  return s.finish(inner_->reduce(s.inOut(tensor), options));
}

std::shared_ptr<Work> HostStagingBackend::allgather(const std::vector<Tensor>& outputs,
                                                    const Tensor& input,
                                                    const AllgatherOptions& options) {
  Staging s(copy_);
  Tensor hostInput = s.in(input);
  return s.finish(inner_->allgather(s.out(outputs), hostInput, options));
}

std::shared_ptr<Work> HostStagingBackend::allgatherIntoTensor(const Tensor& output,
                                                              const Tensor& input,
                                                              const AllgatherOptions& options) {
  Staging s(copy_);
  Tensor hostInput = s.in(input);
  return s.finish(inner_->allgatherIntoTensor(s.out(output), hostInput, options));
}

std::shared_ptr<Work> HostStagingBackend::gather(const std::vector<Tensor>& outputs,
                                                 const Tensor& input,
                                                 const GatherOptions& options) {
  Staging s(copy_);
  Tensor hostInput = s.in(input);
  return s.finish(inner_->gather(s.out(outputs), hostInput, options));
}

std::shared_ptr<Work> HostStagingBackend::scatter(const Tensor& output,
                                                  const std::vector<Tensor>& inputs,
                                                  const ScatterOptions& options) {
  Staging s(copy_);
  std::vector<Tensor> hostInputs = s.in(inputs);
  return s.finish(inner_->scatter(s.out(output), hostInputs, options));
}

std::shared_ptr<Work> HostStagingBackend::reduceScatter(const Tensor& output,
                                                        const std::vector<Tensor>& inputs,
                                                        const ReduceScatterOptions& options) {
  Staging s(copy_);
  std::vector<Tensor> hostInputs = s.in(inputs);
  return s.finish(inner_->reduceScatter(s.out(output), hostInputs, options));
}

std::shared_ptr<Work> HostStagingBackend::reduceScatterTensor(const Tensor& output,
                                                              const Tensor& input,
                                                              const ReduceScatterOptions& options) {
  Staging s(copy_);
  Tensor hostInput = s.in(input);
  return s.finish(inner_->reduceScatterTensor(s.out(output), hostInput, options));
}

std::shared_ptr<Work> HostStagingBackend::alltoall(const std::vector<Tensor>& outputs,
                                                   const std::vector<Tensor>& inputs,
                                                   const AllToAllOptions& options) {
  Staging s(copy_);
  std::vector<Tensor> hostInputs = s.in(inputs);
  return s.finish(inner_->alltoall(s.out(outputs), hostInputs, options));
}

std::shared_ptr<Work> HostStagingBackend::alltoallBase(const Tensor& output, const Tensor& input,
                                                       const std::vector<int64_t>& outputSplitSizes,
                                                       const std::vector<int64_t>& inputSplitSizes,
                                                       const AllToAllOptions& options) {
  Staging s(copy_);
  Tensor hostInput = s.in(input);
  return s.finish(
      inner_->alltoallBase(s.out(output), hostInput, outputSplitSizes, inputSplitSizes, options));
}

std::shared_ptr<Work> HostStagingBackend::barrier(const BarrierOptions& options) {
  return inner_->barrier(options);
}

std::shared_ptr<Work> HostStagingBackend::send(const Tensor& tensor, int dstRank, int tag,
                                               std::chrono::milliseconds timeout) {
  Staging s(copy_);
  return s.finish(inner_->send(s.in(tensor), dstRank, tag, timeout));
}

std::shared_ptr<Work> HostStagingBackend::recv(const Tensor& tensor, int srcRank, int tag,
                                               std::chrono::milliseconds timeout) {
  Staging s(copy_);
  return s.finish(inner_->recv(s.out(tensor), srcRank, tag, timeout));
}

std::shared_ptr<Work> HostStagingBackend::recvAnysource(const Tensor& tensor, int tag,
                                                        std::chrono::milliseconds timeout) {
  Staging s(copy_);
  return s.finish(inner_->recvAnysource(s.out(tensor), tag, timeout));
}

std::vector<std::shared_ptr<Work>> HostStagingBackend::batchIsendIrecv(
    const std::vector<P2POp>& ops, std::chrono::milliseconds timeout) {
  // One Staging per op, so each op's Work completes with its own copy back.
  std::vector<Staging> stagings;
  stagings.reserve(ops.size());
  std::vector<P2POp> hostOps;
  hostOps.reserve(ops.size());
  for (const P2POp& op : ops) {
    Staging& s = stagings.emplace_back(copy_);
    P2POp hostOp = op;
    hostOp.tensor = op.kind == P2POp::Send ? s.in(op.tensor) : s.out(op.tensor);
    hostOps.push_back(std::move(hostOp));
  }
  std::vector<std::shared_ptr<Work>> works = inner_->batchIsendIrecv(hostOps, timeout);
  for (size_t i = 0; i < works.size(); ++i) works[i] = stagings[i].finish(works[i]);
  return works;
}

}  // namespace c10d::inline v0
