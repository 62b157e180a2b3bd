#pragma once

// Private to rpc/: one worker's distributed autograd contexts. For each context id, the
// gradient of each parameter this worker owns (the sum of every gradient sent for it under that
// id) and, on the worker that created the context, the workers it sent gradients to.
//
// Threading: every method may be called from any thread.

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>

#include "c10d/core/Tensor.hpp"
#include "rpc/RpcAgent.hpp"

namespace c10d::inline v0::rpc {

class GradientContexts {
 public:
  // A context id unique across workers: worker << 48 | counter.
  int64_t newId(int worker);
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
  };
  std::atomic<int64_t> counter_{1};
  mutable std::mutex mutex_;
  std::map<int64_t, Context> contexts_;
};

}  // namespace c10d::inline v0::rpc
