#include "c10d/HostStaging.hpp"

#include <utility>

#include "c10d/core/Cuda.hpp"

namespace c10d::inline v1 {

namespace {

// The caller's Work for a staged op (ProcessGroup binds it to the op). Waiting on it waits on the
// inner op first, so a queued inner op still runs on the waiting thread (see QueuedWork) instead
// of costing a hand-off, and the copy back then runs there too.
class StagedWork : public Work {
 public:
  StagedWork(std::shared_ptr<Work> inner, std::vector<Tensor> outputs)
      : Work(std::string(), inner->timeout(), std::move(outputs)), inner_(std::move(inner)) {}

  void wait(std::chrono::milliseconds timeout) override {
    inner_->wait(timeout);
    Work::wait(timeout);
  }
  // Completed by the copy back (Staging::finish).
  using Work::finish;
  using Work::finishWithError;
  using Work::setSourceRank;

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
    staged_ = true;
    Tensor host = Tensor::empty(tensor.sizes(), tensor.dtype());
    copy_(host, tensor);
    return host;
  }
  // A host buffer whose contents go back to tensor when the op has succeeded.
  Tensor out(const Tensor& tensor) {
    if (tensor.device().isCPU()) return tensor;
    staged_ = true;
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
  bool staged() const { return staged_; }

  // The caller's Work: completes once inner has and the outputs are back on the device.
  std::shared_ptr<Work> finish(const std::shared_ptr<Work>& inner) {
    if (!staged_) return inner;
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
            outer->finishWithError(detail::copyError(future.error()));
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
  bool staged_ = false;
  std::vector<std::pair<Tensor, Tensor>> back_;  // (device tensor, host buffer)
};

HostStagingBackend::HostStagingBackend(std::shared_ptr<Backend> inner, Copy copy)
    : Backend(inner->name(), inner->rank(), inner->size()),
      inner_(std::move(inner)),
      copy_(copy ? std::move(copy) : Copy(copyTensor)) {}

std::shared_ptr<Work> HostStagingBackend::start(const Op& op, const OpTensors& tensors) {
  Staging s(copy_);
  // The op writes its own input where it runs in place.
  const bool inPlace = op.traits().inPlace;
  Tensor input, output;
  std::vector<Tensor> inputs, outputs;
  OpTensors host = tensors;
  if (tensors.input != nullptr) {
    input = inPlace ? s.inOut(*tensors.input) : s.in(*tensors.input);
    host.input = &input;
  }
  if (tensors.output != nullptr) {
    output = s.out(*tensors.output);
    host.output = &output;
  }
  if (tensors.inputs != nullptr) {
    inputs = inPlace ? s.inOut(*tensors.inputs) : s.in(*tensors.inputs);
    host.inputs = &inputs;
  }
  if (tensors.outputs != nullptr) {
    outputs = s.out(*tensors.outputs);
    host.outputs = &outputs;
  }
  Op hostOp = op;
  if (s.staged()) {
    hostOp.device = DeviceType::CPU;
    hostOp.flags |= Op::kStaged;
  }
  return s.finish(inner_->start(hostOp, host));
}

std::vector<std::shared_ptr<Work>> HostStagingBackend::startBatch(const std::vector<Op>& ops,
                                                                  const std::vector<P2POp>& p2p) {
  // One Staging per op, so each op's Work completes with its own copy back.
  std::vector<Staging> stagings;
  stagings.reserve(p2p.size());
  std::vector<P2POp> hostP2p;
  hostP2p.reserve(p2p.size());
  std::vector<Op> hostOps = ops;
  for (size_t i = 0; i < p2p.size(); ++i) {
    Staging& s = stagings.emplace_back(copy_);
    P2POp hostOp = p2p[i];
    hostOp.tensor = p2p[i].kind == P2POp::Send ? s.in(p2p[i].tensor) : s.out(p2p[i].tensor);
    hostP2p.push_back(std::move(hostOp));
    if (s.staged() && i < hostOps.size()) {
      hostOps[i].device = DeviceType::CPU;
      hostOps[i].flags |= Op::kStaged;
    }
  }
  std::vector<std::shared_ptr<Work>> works = inner_->startBatch(hostOps, hostP2p);
  for (size_t i = 0; i < works.size(); ++i) works[i] = stagings[i].finish(works[i]);
  return works;
}

}  // namespace c10d::inline v1
