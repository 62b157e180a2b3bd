#include "c10d/rpc/DistAutograd.hpp"

#include <cstring>
#include <map>

#include "c10d/Logging.hpp"
#include "c10d/backends/common/Reduce.hpp"
#include "c10d/rpc/AgentImpl.hpp"

namespace c10d::rpc {

using detail::GlobalId;

namespace {

constexpr const char* kAccumulate = "c10d.autograd.accumulate";
constexpr const char* kRelease = "c10d.autograd.release";

// Gradients for the parameters one owner holds, as they travel.
using GradientList = std::vector<std::tuple<GlobalId, Tensor>>;

// The tensor an RRef owned here holds; InvalidArgument when it is not owned here.
Tensor ownedTensor(RpcAgent::Impl& impl, const GlobalId& id,
                   const std::shared_ptr<detail::RRefCore>& known) {
  std::shared_ptr<detail::RRefCore> core = known ? known : impl.ownedCore(id, false);
  C10D_CHECK(core != nullptr && core->isOwner(), InvalidArgument, "dist autograd: parameter RRef ",
             id.str(), " is not owned by ", impl.describeWorker(impl.self.id));
  return *static_cast<Tensor*>(core->localAddress(typeid(Tensor)));
}

void accumulateHere(RpcAgent::Impl& impl, int64_t context, const GradientList& grads,
                    const std::vector<std::shared_ptr<detail::RRefCore>>& cores) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const auto& [id, grad] = grads[i];
    Tensor param = ownedTensor(impl, id, cores.empty() ? nullptr : cores[i]);
    C10D_CHECK(grad.dtype() == param.dtype() && grad.sizes() == param.sizes(), InvalidArgument,
               "dist autograd: gradient ", grad.describe(), " for parameter RRef ", id.str(), " ",
               param.describe(), " does not match it");
    impl.gradients.accumulate(context, id, grad);
  }
}

}  // namespace

// ---- GradientContexts ----

int64_t GradientContexts::newId(int worker) {
  return (static_cast<int64_t>(worker) << 48) | counter_.fetch_add(1);
}

void GradientContexts::accumulate(int64_t context, const GlobalId& param, const Tensor& grad) {
  C10D_CHECK(grad.defined() && grad.device().isCPU() && grad.isContiguous(), InvalidArgument,
             "dist autograd: gradient for parameter RRef ", param.str(), " is ",
             grad.defined() ? grad.describe() : std::string("undefined"),
             "; it needs a contiguous CPU tensor");
  std::lock_guard<std::mutex> guard(mutex_);
  Tensor& sum = contexts_[context].gradients[param];
  if (!sum.defined()) {
    sum = Tensor::empty(grad.sizes(), grad.dtype());
    if (grad.nbytes() > 0) std::memcpy(sum.data(), grad.data(), grad.nbytes());
    return;
  }
  C10D_CHECK(sum.dtype() == grad.dtype() && sum.sizes() == grad.sizes(), InvalidArgument,
             "dist autograd: gradient ", grad.describe(), " for parameter RRef ", param.str(),
             " does not match the ", sum.describe(), " already accumulated in context ", context);
  reduceFunction(ReduceOp::SUM, sum.dtype())(sum.data(), sum.data(), grad.data(),
                                             static_cast<size_t>(sum.numel()));
}

Tensor GradientContexts::gradient(int64_t context, const GlobalId& param) const {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = contexts_.find(context);
  if (it == contexts_.end()) return Tensor();
  auto grad = it->second.gradients.find(param);
  return grad == it->second.gradients.end() ? Tensor() : grad->second;
}

void GradientContexts::touch(int64_t context, int worker) {
  std::lock_guard<std::mutex> guard(mutex_);
  contexts_[context].touched.insert(worker);
}

std::set<int> GradientContexts::release(int64_t context) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = contexts_.find(context);
  if (it == contexts_.end()) return {};
  std::set<int> touched = std::move(it->second.touched);
  contexts_.erase(it);
  return touched;
}

size_t GradientContexts::size() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return contexts_.size();
}

// ---- DistAutogradContext ----

DistAutogradContext::DistAutogradContext(std::shared_ptr<RpcAgent> agent)
    : agent_(std::move(agent)) {
  C10D_CHECK(agent_ != nullptr, InvalidArgument, "dist autograd: null agent");
  RpcAgent::Impl& impl = agent_->impl();
  id_ = impl.gradients.newId(impl.self.id);
  impl.gradients.touch(id_, impl.self.id);
}

DistAutogradContext::~DistAutogradContext() {
  try {
    release();
  } catch (const std::exception& e) {
    C10D_LOG(Warning, "dist autograd context ", id_, ": release failed: ", e.what());
  }
}

void DistAutogradContext::accumulateGrads(
    const std::vector<std::pair<RRef<Tensor>, Tensor>>& grads) {
  C10D_CHECK(!released_, InvalidArgument, "dist autograd context ", id_, " was released");
  RpcAgent::Impl& impl = agent_->impl();
  std::map<int, GradientList> byOwner;
  std::vector<std::shared_ptr<detail::RRefCore>> localCores;
  for (const auto& [param, grad] : grads) {
    C10D_CHECK(param.defined(), InvalidArgument, "dist autograd: gradient for an empty RRef");
    C10D_CHECK(grad.defined() && grad.device().isCPU() && grad.isContiguous(), InvalidArgument,
               "dist autograd: gradient for ", param.describe(), " is ",
               grad.defined() ? grad.describe() : std::string("undefined"),
               "; it needs a contiguous CPU tensor");
    const auto& core = param.coreHandle();
    byOwner[core->ownerId()].emplace_back(core->id(), grad);
    if (core->ownerId() == impl.self.id) localCores.push_back(core);
  }
  std::vector<Future<void>> sent;
  for (auto& [owner, list] : byOwner) {
    if (owner == impl.self.id) continue;
    impl.gradients.touch(id_, owner);
    sent.push_back(agent_->callTyped<void>(owner, kAccumulate, agent_->options().timeout,
                                           [&] { return pack(std::make_tuple(id_, list)); }));
  }
  std::exception_ptr first;
  auto local = byOwner.find(impl.self.id);
  if (local != byOwner.end()) {
    try {
      accumulateHere(impl, id_, local->second, localCores);
    } catch (...) {
      first = std::current_exception();
    }
  }
  waitAll(sent, first);
}

void DistAutogradContext::release() {
  if (released_) return;
  released_ = true;
  RpcAgent::Impl& impl = agent_->impl();
  std::set<int> touched = impl.gradients.release(id_);
  if (impl.shutDown.load()) return;
  std::vector<Future<void>> sent;
  for (int worker : touched) {
    if (worker == impl.self.id) continue;
    sent.push_back(agent_->callTyped<void>(worker, kRelease, agent_->options().timeout,
                                           [&] { return pack(std::make_tuple(id_)); }));
  }
  waitAll(sent);
}

Tensor gradientOf(RpcAgent& agent, int64_t contextId, const RRef<Tensor>& param) {
  C10D_CHECK(param.defined() && param.isOwner(), InvalidArgument, "dist autograd: gradientOf ",
             param.describe(), " on worker '", agent.self().name, "', which does not own it");
  return agent.impl().gradients.gradient(contextId, param.coreHandle()->id());
}

size_t liveGradientContexts(RpcAgent& agent) {
  return agent.impl().gradients.size();
}

void registerAutogradFunctions(RpcAgent& agent) {
  RpcAgent::Impl* impl = &agent.impl();
  agent.registerBuiltin(kAccumulate, [impl](int64_t context, const GradientList& grads) {
    accumulateHere(*impl, context, grads, {});
  });
  agent.registerBuiltin(kRelease, [impl](int64_t context) { impl->gradients.release(context); });
}

}  // namespace c10d::rpc
