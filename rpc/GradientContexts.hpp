#pragma once

// Private to rpc/: one worker's distributed autograd contexts. For each context id, the
// gradient of each parameter this worker owns (the sum of every gradient sent for it under that
// id), the workers this one sent gradients to or called in it (to release it there), and the
// tensors each call in it carried (what a backward pass sends gradients back along).
//
// Threading: every method may be called from any thread.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "c10d/core/Tensor.hpp"
#include "rpc/RpcAgent.hpp"

namespace c10d::inline v1::rpc {

class GradientContexts {
 public:
  // The tensors one call of a context carried one way, and the worker at the other end.
  struct Edge {
    int64_t message = 0;
    int peer = -1;
    std::vector<Tensor> tensors;
  };

  // A context id unique across workers: worker << 48 | counter. Message ids share the counter.
  int64_t newId(int worker);
  // Records what call `message` of context carried: sent by this worker to peer, or received
  // from it.
  void record(int64_t context, bool sent, int64_t message, int peer, std::vector<Tensor> tensors);
  // What this worker sent in message; InvalidArgument naming both ids when it sent nothing so.
  Edge sent(int64_t context, int64_t message) const;
  // Everything this worker received in context, in message order.
  std::vector<Edge> received(int64_t context) const;
  // The worker's local backward: a LocalBackward (rpc/autograd/DistAutograd.hpp), type-erased
  // because this layer sits below autograd's.
  void setLocalBackward(std::shared_ptr<const void> localBackward);
  std::shared_ptr<const void> localBackward() const;
  // Adds grad (a contiguous CPU tensor: callers check) to param's gradient in context, a copy
  // on first use. Throws InvalidArgument when it differs in dtype or sizes from what is there.
  void accumulate(int64_t context, const detail::GlobalId& param, const Tensor& grad);
  // param's gradient in context; undefined when there is none.
  Tensor gradient(int64_t context, const detail::GlobalId& param) const;
  void touch(int64_t context, int worker);
  // Forgets context here; returns the workers it touched.
  std::set<int> release(int64_t context);
  size_t size() const;

 private:
  struct Context {
    std::map<detail::GlobalId, Tensor> gradients;
    std::set<int> touched;
    std::map<int64_t, Edge> sent;
    std::map<int64_t, Edge> received;
  };
  std::shared_ptr<const void> localBackward_;
  std::atomic<int64_t> counter_{1};
  mutable std::mutex mutex_;
  std::map<int64_t, Context> contexts_;
};

}  // namespace c10d::inline v1::rpc
