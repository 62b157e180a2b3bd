#pragma once

/// \file
/// Distributed autograd contexts, like torch.distributed.autograd's: the gradients of one
/// training step for parameters that live on other workers, and the distributed backward pass
/// that computes them (PyTorch's FAST mode).
///
/// c10d has no autograd of its own: each worker hands its framework's local backward to
/// setLocalBackward. Calls made in a context (context.rpcSync, or rpcAsyncInContext from a
/// function called in one) record the tensors they carry: the arguments as sent by the caller and
/// received by the callee, the result the other way. backward(roots) runs the local backward from
/// the roots, sends the gradients of the tensors this worker received back to their senders, which
/// run their local backward from the tensors they sent, and so on; it returns once every worker
/// reached has finished. A root or gradient that arrives for a tensor this worker received (a
/// result used as it came) goes straight back to its sender; the rest goes through the local
/// backward, which adds parameter gradients to the context with accumulateGradient (or
/// accumulateGrads), and DistributedOptimizer::step(id) applies them.
///
/// \code
/// DistAutogradContext context(agent);                 // id = worker << 48 | counter
/// Tensor out = context.rpcSync<Tensor>("worker1", "layer2", hidden);
/// context.backward({{out, gradOfLossByOut}});
/// optimizer.step(context.id());
/// // ~DistAutogradContext frees the context on every worker it touched
/// \endcode
///
/// Without the engine, a program that computes every gradient itself sends them with
/// accumulateGrads:
///
/// \code
/// context.accumulateGrads({{weightsRRef, weightsGrad}, {biasRRef, biasGrad}});
/// \endcode
///
/// Errors: accumulateGrads throws InvalidArgument for a gradient that does not match its
/// parameter (dtype, sizes) or is not a contiguous CPU tensor, and the owner's error (RemoteError,
/// TimeoutError) when an owner could not add them; the others still did.
///
/// backward throws StateError on a worker without a local backward that needs one, InvalidArgument
/// for a local backward that returns the wrong number of gradients or one that does not match its
/// tensor, and a worker's failure (RemoteError naming the worker, a lost one included) after the
/// others reached have finished.
///
/// Threading: a context may be used from several threads; gradients sent concurrently to the
/// same parameter are all added. A worker's local backward may run on several of the agent's
/// threads at once (one per gradient message, as PyTorch's FAST mode).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "rpc/RpcAgent.hpp"

namespace c10d::inline v1::rpc {

/// One distributed autograd context (see the file's overview): the calls made in it, the
/// gradients they lead to, and the backward pass over them. Not copyable; the destructor releases
/// it everywhere.
class DistAutogradContext {
 public:
  /// A new context, with an id unique across workers.
  /// \param agent This worker's agent; not null (InvalidArgument).
  explicit DistAutogradContext(std::shared_ptr<RpcAgent> agent);
  /// release(); an error there is logged.
  ~DistAutogradContext();
  DistAutogradContext(const DistAutogradContext&) = delete;
  DistAutogradContext& operator=(const DistAutogradContext&) = delete;

  /// \return The context's id: this worker's id << 48 | a counter of this worker's.
  int64_t id() const { return id_; }
  /// Adds each gradient to its parameter's gradient in this context on the parameter's owner: one
  /// message per owner, all sent before any is waited for. Blocks until every owner answered.
  /// \param grads (parameter, gradient) pairs; a gradient is a contiguous CPU tensor with its
  ///   parameter's dtype and sizes. Errors are as the file's overview says.
  /// \throws StateError after release().
  void accumulateGrads(const std::vector<std::pair<RRef<Tensor>, Tensor>>& grads);
  /// Frees this context on every worker it sent gradients to or called in it, and here
  /// (a worker that got a call in it passes the release on to those it called). Idempotent.
  /// Throws the first worker's error after every worker answered; the context counts as
  /// released all the same.
  void release();

  /// Calls function on worker `to` in this context (see rpcAsyncInContext).
  /// \tparam R The result's type; void for none.
  /// \tparam A The arguments' types.
  /// \param to The callee worker's name.
  /// \param function The name the callee registered the function under.
  /// \param args The function's arguments.
  /// \return A future of the result, as RpcAgent::rpcAsync()'s.
  /// \throws StateError at once after release().
  template <typename R, typename... A>
  Future<R> rpcAsync(const std::string& to, const std::string& function, A&&... args);
  /// rpcAsync(), waiting for the result: throws what the future would fail with.
  /// \tparam R The result's type; void for none.
  /// \tparam A The arguments' types.
  /// \param to The callee worker's name.
  /// \param function The name the callee registered the function under.
  /// \param args The function's arguments.
  /// \return The function's result.
  template <typename R, typename... A>
  R rpcSync(const std::string& to, const std::string& function, A&&... args) {
    return rpcAsync<R>(to, function, std::forward<A>(args)...).value();
  }
  /// The distributed backward pass from roots: (tensor, the gradient flowing into it) on this
  /// worker. Blocks until every worker it reached has run its local backward.
  /// \param roots (tensor, gradient) pairs, at least one; each gradient has its tensor's dtype and
  ///   sizes (else InvalidArgument). Other errors are as the file's overview says.
  /// \throws StateError after release().
  void backward(const std::vector<std::pair<Tensor, Tensor>>& roots);

 private:
  std::shared_ptr<RpcAgent> agent_;
  int64_t id_;
  std::atomic<bool> released_{false};  // release() may race the context's other calls
};

/// One worker's share of a distributed backward pass, as its local backward sees it.
struct LocalBackwardCall {
  int64_t contextId = -1;  ///< the context of the backward pass
  /// (a tensor of this worker's graph, the gradient flowing into it): backward's roots, or the
  /// tensors this worker sent in one call of the context with the gradients their receiver
  /// computed for them; never one of received (their gradients pass straight back).
  std::vector<std::pair<Tensor, Tensor>> seeds;
  /// Every tensor this worker received in the context: the local backward returns the gradient
  /// of each, in this order (undefined where none reaches it), and each goes back to its sender.
  std::vector<Tensor> received;
};
/// A framework's local backward: runs the worker's backward from call's seeds and returns the
/// gradient of each of call.received, in order (an undefined Tensor where none reaches it). It
/// may run on several of the agent's threads at once.
using LocalBackward = std::function<std::vector<Tensor>(const LocalBackwardCall& call)>;
/// The framework's local backward on agent's worker (replaces the previous one).
/// \param agent This worker's agent.
/// \param localBackward The local backward; empty: none (a backward pass that needs one then
///   fails with StateError).
void setLocalBackward(RpcAgent& agent, LocalBackward localBackward);

/// Calls function on worker `to` in context contextId, recording the tensors of the arguments as
/// sent here and received there and those of the result the other way, so that a backward pass
/// takes gradients back along them. A function called so runs with currentContextId() set, and
/// calls it makes with rpcAsyncInContext(agent, currentContextId(), ...) belong to the context.
/// \tparam R The result's type; void for none.
/// \tparam A The arguments' types.
/// \param agent This worker's agent.
/// \param contextId The context's id (DistAutogradContext::id() or currentContextId()); not
///   negative.
/// \param to The callee worker's name.
/// \param function The name the callee registered the function under.
/// \param args The function's arguments.
/// \return A future of the result; it fails as RpcAgent::rpcAsync()'s does.
/// \throws InvalidArgument at once for a negative contextId, an unknown worker or an argument
///   that cannot be packed.
/// \throws StateError at once after the agent's shutdown().
template <typename R, typename... A>
Future<R> rpcAsyncInContext(RpcAgent& agent, int64_t contextId, const std::string& to,
                            const std::string& function, A&&... args);
/// The context of the call this thread is running, else -1.
/// \return That context's id, or -1.
int64_t currentContextId();

/// Adds grad to param's gradient in context contextId; param is owned by agent's worker (a local
/// backward records the gradients of its parameters so). InvalidArgument as accumulateGrads.
/// \param agent This worker's agent.
/// \param contextId The context's id.
/// \param param The parameter; this worker owns it (else InvalidArgument).
/// \param grad The gradient: a contiguous CPU tensor with param's dtype and sizes.
void accumulateGradient(RpcAgent& agent, int64_t contextId, const RRef<Tensor>& param,
                        const Tensor& grad);

/// The gradient of param (owned by agent's worker) in context contextId; undefined when none.
/// Throws InvalidArgument when param is not owned here.
/// \param agent This worker's agent.
/// \param contextId The context's id.
/// \param param The parameter.
/// \return The gradients added to param in the context, summed; an undefined Tensor when none.
Tensor gradientOf(RpcAgent& agent, int64_t contextId, const RRef<Tensor>& param);
/// How many contexts this worker holds (created here, or with gradients of its parameters).
/// \param agent This worker's agent.
/// \return That count.
size_t liveGradientContexts(RpcAgent& agent);

namespace detail {
/// rpcAsyncInContext's untyped core: arguments packed already; the reply as it came.
Future<Packed> callInContext(RpcAgent& agent, int64_t contextId, int to,
                             const std::string& function, Packed arguments);
}  // namespace detail

template <typename R, typename... A>
Future<R> rpcAsyncInContext(RpcAgent& agent, int64_t contextId, const std::string& to,
                            const std::string& function, A&&... args) {
  const int peer = agent.workerInfo(to).id;
  Packed arguments;
  {
    detail::RRefScope scope(agent, peer);
    arguments = pack(std::make_tuple(std::forward<A>(args)...));
  }
  return detail::callInContext(agent, contextId, peer, function, std::move(arguments))
      .then([&agent, peer, function](Future<Packed> reply) {
        if constexpr (std::is_void_v<R>) {
          reply.value();
        } else {
          Packed packed = reply.value();
          detail::RRefScope scope(agent, peer);
          return unpack<R>(packed.bytes, packed.tensors, [&] {
            return "result of '" + function + "' from " +
                   detail::AgentInternals::describeWorker(agent, peer);
          });
        }
      });
}

template <typename R, typename... A>
Future<R> DistAutogradContext::rpcAsync(const std::string& to, const std::string& function,
                                        A&&... args) {
  C10D_CHECK(!released_, StateError, "dist autograd context ", id_, " was released");
  return rpcAsyncInContext<R>(*agent_, id_, to, function, std::forward<A>(args)...);
}

}  // namespace c10d::inline v1::rpc
