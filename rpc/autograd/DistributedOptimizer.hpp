#pragma once

// The distributed optimizer, like torch.distributed.optim.DistributedOptimizer: one functional
// optimizer on each worker that owns some of the parameters, stepped together.
//
//   DistributedOptimizer optimizer(agent, OptimizerSpec::adam(1e-3), {w1, w2, b});  // RRefs
//   DistAutogradContext context(agent);
//   context.accumulateGrads({{w1, g1}, {w2, g2}, {b, gb}});
//   optimizer.step(context.id());
//
// Errors: the constructor throws InvalidArgument for a bad spec (before anything is sent) and
// what an owner failed with while creating its optimizer; step() rethrows the first owner's
// error after every owner has finished.
//
// Threading: step() may be called from several threads (each trainer of a parameter server);
// the steps of one owner run one at a time there (a lock per owner worker).

#include <cstdint>
#include <memory>
#include <vector>

#include "rpc/RpcAgent.hpp"
#include "rpc/autograd/Optimizers.hpp"

namespace c10d::inline v0::rpc {

namespace detail {
class LocalOptimizer;
}

class DistributedOptimizer {
 public:
  DistributedOptimizer(std::shared_ptr<RpcAgent> agent, const OptimizerSpec& spec,
                       const std::vector<RRef<Tensor>>& params);

  // Runs every owner's optimizer, concurrently, on its parameters with their gradients in the
  // context contextId (parameters without one are left alone).
  void step(int64_t contextId);

 private:
  std::shared_ptr<RpcAgent> agent_;
  std::vector<RRef<detail::LocalOptimizer>> optimizers_;
};

}  // namespace c10d::inline v0::rpc
