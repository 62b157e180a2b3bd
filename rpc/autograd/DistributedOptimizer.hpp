#pragma once

/// \file
/// The distributed optimizer, like torch.distributed.optim.DistributedOptimizer: one functional
/// optimizer on each worker that owns some of the parameters, stepped together.
///
/// \code
/// DistributedOptimizer optimizer(agent, OptimizerSpec::adam(1e-3), {w1, w2, b});  // RRefs
/// DistAutogradContext context(agent);
/// context.accumulateGrads({{w1, g1}, {w2, g2}, {b, gb}});
/// optimizer.step(context.id());
/// \endcode
///
/// Errors: the constructor throws InvalidArgument for a bad spec (before anything is sent) and
/// what an owner failed with while creating its optimizer; step() rethrows the first owner's
/// error after every owner has finished.
///
/// Threading: step() may be called from several threads (each trainer of a parameter server);
/// the steps of one owner run one at a time there (a lock per owner worker).

#include <cstdint>
#include <memory>
#include <vector>

#include "c10d/training/Optimizers.hpp"
#include "rpc/RpcAgent.hpp"

// An OptimizerSpec travels as [name, options], what MSGPACK_DEFINE(name, options) would write;
// the spec itself lives below RPC (c10d/training) and knows no msgpack.
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {
  template <>
  struct convert<c10d::OptimizerSpec> {
    const msgpack::object& operator()(const msgpack::object& o, c10d::OptimizerSpec& v) const {
      if (o.type != msgpack::type::ARRAY || o.via.array.size != 2) throw msgpack::type_error();
      o.via.array.ptr[0].convert(v.name);
      o.via.array.ptr[1].convert(v.options);
      return o;
    }
  };
  template <>
  struct pack<c10d::OptimizerSpec> {
    template <typename Stream>
    packer<Stream>& operator()(packer<Stream>& p, const c10d::OptimizerSpec& v) const {
      p.pack_array(2);
      p.pack(v.name);
      p.pack(v.options);
      return p;
    }
  };
  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack

namespace c10d::inline v1::rpc {

/// The functional optimizers are the data-parallel layer's (c10d/training/Optimizers.hpp); these
/// names keep rpc::OptimizerSpec and friends working.
using c10d::FunctionalOptimizer;
using c10d::makeOptimizer;
using c10d::OptimizerSpec;

namespace detail {
class LocalOptimizer;
}

/// A functional optimizer on each owner of some of the parameters, stepped together (see the
/// file's overview).
class DistributedOptimizer {
 public:
  /// Creates an optimizer on each owner of params, over the parameters it owns; blocks until
  /// every owner answered. Errors are as the file's overview says.
  /// \param agent This worker's agent; not null (InvalidArgument).
  /// \param spec The optimizer and its options, the same on every owner.
  /// \param params The parameters, at least one, none empty (else InvalidArgument).
  DistributedOptimizer(std::shared_ptr<RpcAgent> agent, const OptimizerSpec& spec,
                       const std::vector<RRef<Tensor>>& params);

  /// Runs every owner's optimizer, concurrently, on its parameters with their gradients in the
  /// context contextId (parameters without one are left alone).
  /// \param contextId The id of the DistAutogradContext whose gradients to apply.
  void step(int64_t contextId);

 private:
  std::shared_ptr<RpcAgent> agent_;
  std::vector<RRef<detail::LocalOptimizer>> optimizers_;
};

}  // namespace c10d::inline v1::rpc
