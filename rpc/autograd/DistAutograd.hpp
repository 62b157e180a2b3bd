#pragma once

// Distributed autograd contexts, like torch.distributed.autograd's: the gradients of one
// training step for parameters that live on other workers. The host framework computes the
// gradients (c10d has no autograd engine); accumulateGrads() adds each one to its parameter's
// gradient on the parameter's owner, under the context's id, and DistributedOptimizer::step(id)
// applies them there.
//
//   DistAutogradContext context(agent);                 // id = worker << 48 | counter
//   context.accumulateGrads({{weightsRRef, weightsGrad}, {biasRRef, biasGrad}});
//   optimizer.step(context.id());
//   // ~DistAutogradContext frees the context on every worker it touched
//
// Errors: accumulateGrads throws InvalidArgument for a gradient that does not match its
// parameter (dtype, sizes) or is not a contiguous CPU tensor, and the owner's error (RemoteError,
// TimeoutError) when an owner could not add them; the others still did.
//
// Threading: a context may be used from several threads; gradients sent concurrently to the
// same parameter are all added.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "rpc/RpcAgent.hpp"

namespace c10d::inline v0::rpc {

class DistAutogradContext {
 public:
  explicit DistAutogradContext(std::shared_ptr<RpcAgent> agent);
  // release(); an error there is logged.
  ~DistAutogradContext();
  DistAutogradContext(const DistAutogradContext&) = delete;
  DistAutogradContext& operator=(const DistAutogradContext&) = delete;

  int64_t id() const { return id_; }
  // Adds each gradient to its parameter's gradient in this context on the parameter's owner: one
  // message per owner, all sent before any is waited for. Blocks until every owner answered.
  void accumulateGrads(const std::vector<std::pair<RRef<Tensor>, Tensor>>& grads);
  // Frees this context on every worker it sent gradients to, and here. Idempotent.
  void release();

 private:
  std::shared_ptr<RpcAgent> agent_;
  int64_t id_;
  bool released_ = false;
};

// The gradient of param (owned by agent's worker) in context contextId; undefined when none.
// Throws InvalidArgument when param is not owned here.
Tensor gradientOf(RpcAgent& agent, int64_t contextId, const RRef<Tensor>& param);
// How many contexts this worker holds (created here, or with gradients of its parameters).
size_t liveGradientContexts(RpcAgent& agent);

}  // namespace c10d::inline v0::rpc
