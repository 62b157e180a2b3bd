#include "rpc/autograd/DistAutograd.hpp"

#include <map>

#include "backends/common/Reduce.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Logging.hpp"
#include "rpc/AgentImpl.hpp"

namespace c10d::inline v0::rpc {

using detail::GlobalId;

namespace {

constexpr const char* kAccumulate = "c10d.autograd.accumulate";
constexpr const char* kRelease = "c10d.autograd.release";

// Gradients for the parameters one owner holds, as they travel.
using GradientList = std::vector<std::tuple<GlobalId, Tensor>>;

// Adds grad to param's gradient (param: the tensor that RRef id holds here) in context.
void addGradient(RpcAgent::Impl& impl, int64_t context, const GlobalId& id, const Tensor& param,
                 const Tensor& grad) {
  C10D_CHECK(grad.dtype() == param.dtype() && grad.sizes() == param.sizes(), InvalidArgument,
             "dist autograd: gradient ", grad.describe(), " for parameter RRef ", id.str(), " ",
             param.describe(), " does not match it");
  impl.gradients.accumulate(context, id, grad);
}

// On the owner: gradients that came from another worker, for parameters in its table.
void accumulateReceived(RpcAgent::Impl& impl, int64_t context, const GradientList& grads) {
  for (const auto& [id, grad] : grads) {
    std::shared_ptr<detail::RRefCore> core = impl.rrefs.owned(id);
    C10D_CHECK(core != nullptr, StateError, "dist autograd: parameter RRef ", id.str(),
               " is not owned by ", impl.describeWorker(impl.self.id));
    addGradient(impl, context, id, *static_cast<Tensor*>(core->localAddress(typeid(Tensor))), grad);
  }
}

}  // namespace

// ---- GradientContexts ----

int64_t GradientContexts::newId(int worker) {
  return (static_cast<int64_t>(worker) << 48) | counter_.fetch_add(1);
}

void GradientContexts::accumulate(int64_t context, const GlobalId& param, const Tensor& grad) {
  std::lock_guard<std::mutex> guard(mutex_);
  Tensor& sum = contexts_[context].gradients[param];
  if (!sum.defined()) {
    sum = Tensor::empty(grad.sizes(), grad.dtype());
    copyTensor(sum, grad);
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
  RpcAgent::Impl& impl = detail::AgentInternals::impl(*agent_);
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
  C10D_CHECK(!released_, StateError, "dist autograd context ", id_, " was released");
  RpcAgent::Impl& impl = detail::AgentInternals::impl(*agent_);
  std::map<int, GradientList> byOwner;  // other workers
  std::vector<std::pair<RRef<Tensor>, Tensor>> local;
  for (const auto& [param, grad] : grads) {
    C10D_CHECK(param.defined(), InvalidArgument, "dist autograd: gradient for an empty RRef");
    C10D_CHECK(grad.defined() && grad.device().isCPU() && grad.isContiguous(), InvalidArgument,
               "dist autograd: gradient for ", param.describe(), " is ",
               grad.defined() ? grad.describe() : std::string("undefined"),
               "; it needs a contiguous CPU tensor");
    const auto& core = param.coreHandle();
    if (core->ownerId() == impl.self.id) {
      local.emplace_back(param, grad);
    } else {
      byOwner[core->ownerId()].emplace_back(core->id(), grad);
    }
  }
  std::vector<Future<void>> sent;
  // Not a structured binding: clang 14 cannot capture one.
  for (const auto& entry : byOwner) {
    impl.gradients.touch(id_, entry.first);
    sent.push_back(detail::AgentInternals::call<void>(
        *agent_, entry.first, kAccumulate, agent_->options().timeout,
        [&] { return pack(std::make_tuple(id_, entry.second)); }));
  }
  std::exception_ptr first;
  try {
    for (const auto& [param, grad] : local) {
      addGradient(impl, id_, param.coreHandle()->id(), param.localValue(), grad);
    }
  } catch (...) {
    first = std::current_exception();
  }
  waitAll(sent, first);
}

void DistAutogradContext::release() {
  if (released_) return;
  released_ = true;
  RpcAgent::Impl& impl = detail::AgentInternals::impl(*agent_);
  std::set<int> touched = impl.gradients.release(id_);
  if (impl.shutDown.load()) return;
  std::vector<Future<void>> sent;
  for (int worker : touched) {
    if (worker == impl.self.id) continue;
    sent.push_back(detail::AgentInternals::call<void>(*agent_, worker, kRelease,
                                                      agent_->options().timeout,
                                                      [&] { return pack(std::make_tuple(id_)); }));
  }
  waitAll(sent);
}

Tensor gradientOf(RpcAgent& agent, int64_t contextId, const RRef<Tensor>& param) {
  C10D_CHECK(param.defined() && param.isOwner(), InvalidArgument, "dist autograd: gradientOf ",
             param.describe(), " on worker '", agent.self().name, "', which does not own it");
  return detail::AgentInternals::impl(agent).gradients.gradient(contextId,
                                                                param.coreHandle()->id());
}

size_t liveGradientContexts(RpcAgent& agent) {
  return detail::AgentInternals::impl(agent).gradients.size();
}

void registerAutogradFunctions(RpcAgent& agent) {
  RpcAgent::Impl* impl = &detail::AgentInternals::impl(agent);
  detail::AgentInternals::registerBuiltin(agent, kAccumulate,
                                          [impl](int64_t context, const GradientList& grads) {
                                            accumulateReceived(*impl, context, grads);
                                          });
  detail::AgentInternals::registerBuiltin(
      agent, kRelease, [impl](int64_t context) { impl->gradients.release(context); });
}

}  // namespace c10d::inline v0::rpc
