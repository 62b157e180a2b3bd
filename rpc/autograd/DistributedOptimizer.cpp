#include "rpc/autograd/DistributedOptimizer.hpp"

#include <map>

#include "rpc/AgentImpl.hpp"

namespace c10d::inline v1::rpc {

namespace {
constexpr const char* kCreate = "c10d.optim.create";
constexpr const char* kStep = "c10d.optim.step";
}  // namespace

namespace detail {

// One owner's optimizer over the parameters it owns; lives only there.
class LocalOptimizer : public RemoteObject {
 public:
  LocalOptimizer(const OptimizerSpec& spec, std::vector<RRef<Tensor>> params)
      : optimizer_(makeOptimizer(spec)), params_(std::move(params)) {}

  void step(RpcAgent::Impl& impl, int64_t contextId) {
    std::vector<Tensor> values;
    std::vector<Tensor> grads;
    for (const RRef<Tensor>& param : params_) {
      values.push_back(param.localValue());
      grads.push_back(impl.gradients.gradient(contextId, param.coreHandle()->id()));
    }
    std::lock_guard<std::mutex> guard(impl.optimizerStep);
    optimizer_->step(values, grads);
  }

 private:
  std::unique_ptr<FunctionalOptimizer> optimizer_;
  std::vector<RRef<Tensor>> params_;
};

}  // namespace detail

DistributedOptimizer::DistributedOptimizer(std::shared_ptr<RpcAgent> agent,
                                           const OptimizerSpec& spec,
                                           const std::vector<RRef<Tensor>>& params)
    : agent_(std::move(agent)) {
  C10D_CHECK(agent_ != nullptr, InvalidArgument, "DistributedOptimizer: null agent");
  C10D_CHECK(!params.empty(), InvalidArgument, "DistributedOptimizer: no parameters");
  makeOptimizer(spec);  // a bad spec fails here, before anything is sent
  std::map<int, std::vector<RRef<Tensor>>> byOwner;
  for (const RRef<Tensor>& param : params) {
    C10D_CHECK(param.defined(), InvalidArgument, "DistributedOptimizer: an empty parameter RRef");
    byOwner[param.coreHandle()->ownerId()].push_back(param);
  }
  std::vector<Future<RRef<detail::LocalOptimizer>>> created;
  for (const auto& entry : byOwner) {
    created.push_back(detail::AgentInternals::call<RRef<detail::LocalOptimizer>>(
        *agent_, entry.first, kCreate, agent_->options().timeout,
        [&] { return pack(std::make_tuple(spec, entry.second)); }));
  }
  waitAll(created);  // as step() does: every owner answers before the first error is thrown
  for (auto& future : created) optimizers_.push_back(future.value());
}

void DistributedOptimizer::step(int64_t contextId) {
  std::vector<Future<void>> steps;
  for (const auto& optimizer : optimizers_) {
    steps.push_back(optimizer.rpcAsync<void>(kStep, contextId));
  }
  waitAll(steps);
}

void registerOptimizerFunctions(RpcAgent& agent) {
  RpcAgent* raw = &agent;
  detail::AgentInternals::registerBuiltin(
      agent, kCreate, [raw](const OptimizerSpec& spec, std::vector<RRef<Tensor>> params) {
        for (const RRef<Tensor>& param : params) {
          C10D_CHECK(param.isOwner(), InvalidArgument, "DistributedOptimizer: ", param.describe(),
                     " sent to worker '", raw->self().name, "', which does not own it");
        }
        return raw->makeRRef(detail::LocalOptimizer(spec, std::move(params)));
      });
  RpcAgent::Impl* impl = &detail::AgentInternals::impl(agent);
  detail::AgentInternals::registerBuiltin(
      agent, kStep, [impl](RRef<detail::LocalOptimizer> self, int64_t contextId) {
        self.localValue().step(*impl, contextId);
      });
}

}  // namespace c10d::inline v1::rpc
