#include "rpc/autograd/DistAutograd.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "backends/common/Reduce.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Logging.hpp"
#include "rpc/AgentImpl.hpp"

namespace c10d::inline v1::rpc {

using detail::GlobalId;

namespace {

constexpr const char* kAccumulate = "c10d.autograd.accumulate";
constexpr const char* kRelease = "c10d.autograd.release";
constexpr const char* kCall = "c10d.autograd.call";          // a user call in a context
constexpr const char* kBackward = "c10d.autograd.backward";  // gradients back along one call

// The context of the call this thread runs (serveCall sets it around the function).
thread_local int64_t tlsContext = -1;

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

// A tensor of zeros shaped like like: the gradient of a tensor no gradient reached.
Tensor zerosLike(const Tensor& like) {
  Tensor zeros = Tensor::empty(like.sizes(), like.dtype());
  std::memset(zeros.data(), 0, zeros.nbytes());
  return zeros;
}

// grad, or the sum of sum and grad when sum is defined (a new tensor either way).
Tensor addGradients(const Tensor& sum, const Tensor& grad) {
  if (!sum.defined()) return grad;
  Tensor out = Tensor::empty(sum.sizes(), sum.dtype());
  reduceFunction(ReduceOp::SUM, sum.dtype())(out.data(), sum.data(), grad.data(),
                                             static_cast<size_t>(sum.numel()));
  return out;
}

// This worker's share of a backward pass of context from seeds: a seed that is a tensor this
// worker received passes its gradient straight back; the others go through the local backward;
// then the gradients of what it received go back to their senders. Completes when they have.
Future<void> backwardFrom(RpcAgent& agent, int64_t context,
                          std::vector<std::pair<Tensor, Tensor>> seeds) {
  RpcAgent::Impl& impl = detail::AgentInternals::impl(agent);
  std::vector<GradientContexts::Edge> edges = impl.gradients.received(context);
  LocalBackwardCall call{context, {}, {}};
  for (const auto& edge : edges) {
    call.received.insert(call.received.end(), edge.tensors.begin(), edge.tensors.end());
  }
  std::vector<Tensor> grads(call.received.size());
  for (auto& seed : seeds) {
    auto same = std::find_if(call.received.begin(), call.received.end(), [&](const Tensor& r) {
      return r.data() == seed.first.data() && r.nbytes() == seed.first.nbytes() &&
             r.dtype() == seed.first.dtype();
    });
    if (same == call.received.end()) {
      call.seeds.push_back(std::move(seed));
      continue;
    }
    Tensor& grad = grads[static_cast<size_t>(same - call.received.begin())];
    grad = addGradients(grad, seed.second);
  }
  if (!call.seeds.empty()) {
    auto local = std::static_pointer_cast<const LocalBackward>(impl.gradients.localBackward());
    C10D_CHECK(local != nullptr && *local, StateError, "dist autograd backward of context ",
               context, " on ", impl.describeWorker(impl.self.id),
               ": no local backward is set; call setLocalBackward with the framework's (c10d has "
               "no autograd of its own)");
    std::vector<Tensor> computed = (*local)(call);
    C10D_CHECK(computed.size() == call.received.size(), InvalidArgument,
               "dist autograd backward of context ", context, " on ",
               impl.describeWorker(impl.self.id), ": the local backward returned ", computed.size(),
               " gradients for the ", call.received.size(), " tensors this worker received");
    for (size_t i = 0; i < computed.size(); ++i) {
      if (computed[i].defined()) grads[i] = addGradients(grads[i], computed[i]);
    }
  }
  std::vector<Future<void>> sent;
  size_t next = 0;
  for (const auto& edge : edges) {
    std::vector<Tensor> back;
    bool reached = false;
    for (const Tensor& tensor : edge.tensors) {
      const Tensor& grad = grads[next++];
      if (!grad.defined()) {
        back.push_back(zerosLike(tensor));
        continue;
      }
      C10D_CHECK(grad.dtype() == tensor.dtype() && grad.sizes() == tensor.sizes() &&
                     grad.device().isCPU() && grad.isContiguous(),
                 InvalidArgument, "dist autograd backward of context ", context, ": the gradient ",
                 grad.describe(), " for ", tensor.describe(), " received from ",
                 impl.describeWorker(edge.peer),
                 " does not match it (or is not a contiguous CPU tensor)");
      back.push_back(grad);
      reached = true;
    }
    if (!reached) continue;
    sent.push_back(detail::AgentInternals::call<void>(
        agent, edge.peer, kBackward, agent.options().timeout,
        [&] { return pack(std::make_tuple(context, edge.message, back)); }));
  }
  return whenAll(std::move(sent));
}

// On the callee of a call in a context: records the tensors it carried, runs the function with
// the context current, and records the result's tensors as sent back.
void serveCall(RpcAgent::Impl& impl, Packed& arguments, RpcAgent::Reply reply) {
  const int peer = detail::RRefScope::current()->peer;
  std::vector<Tensor> none;
  auto [context, message, function, bytes] =
      unpack<std::tuple<int64_t, int64_t, std::string, std::string>>(
          arguments.bytes, none, [] { return std::string("a call in a dist autograd context"); });
  impl.gradients.record(context, false, message, peer, arguments.tensors);
  Packed inner{std::move(bytes), std::move(arguments.tensors)};
  const int64_t outer = tlsContext;
  tlsContext = context;
  impl.dispatch(function, inner, peer,
                [&impl, context = context, message = message, peer, reply = std::move(reply)](
                    std::exception_ptr error, Packed* result) {
                  if (error) {
                    reply(error, nullptr);
                    return;
                  }
                  impl.gradients.record(context, true, message, peer, result->tensors);
                  const std::function<Packed()> packResult = [result] {
                    return std::move(*result);
                  };
                  reply(nullptr, &packResult);
                });
  tlsContext = outer;
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

void GradientContexts::record(int64_t context, bool sent, int64_t message, int peer,
                              std::vector<Tensor> tensors) {
  std::lock_guard<std::mutex> guard(mutex_);
  Context& c = contexts_[context];
  c.touched.insert(peer);
  (sent ? c.sent : c.received)[message] = Edge{message, peer, std::move(tensors)};
}

GradientContexts::Edge GradientContexts::sent(int64_t context, int64_t message) const {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = contexts_.find(context);
  C10D_CHECK(it != contexts_.end(), InvalidArgument, "dist autograd: no context ", context,
             " here (released, or never made or called in)");
  auto edge = it->second.sent.find(message);
  C10D_CHECK(edge != it->second.sent.end(), InvalidArgument, "dist autograd: context ", context,
             " sent nothing in message ", message, " from here");
  return edge->second;
}

std::vector<GradientContexts::Edge> GradientContexts::received(int64_t context) const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<Edge> edges;
  auto it = contexts_.find(context);
  if (it == contexts_.end()) return edges;
  for (const auto& entry : it->second.received) edges.push_back(entry.second);
  return edges;
}

void GradientContexts::setLocalBackward(std::shared_ptr<const void> localBackward) {
  std::lock_guard<std::mutex> guard(mutex_);
  localBackward_ = std::move(localBackward);
}

std::shared_ptr<const void> GradientContexts::localBackward() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return localBackward_;
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
  if (released_.exchange(true)) return;  // once, whichever thread releases first
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

void DistAutogradContext::backward(const std::vector<std::pair<Tensor, Tensor>>& roots) {
  C10D_CHECK(!released_, StateError, "dist autograd context ", id_, " was released");
  C10D_CHECK(!roots.empty(), InvalidArgument, "dist autograd backward of context ", id_,
             ": no roots");
  for (const auto& [root, grad] : roots) {
    C10D_CHECK(root.defined() && grad.defined() && grad.dtype() == root.dtype() &&
                   grad.sizes() == root.sizes(),
               InvalidArgument, "dist autograd backward of context ", id_, ": the gradient ",
               grad.defined() ? grad.describe() : std::string("undefined"), " of root ",
               root.defined() ? root.describe() : std::string("undefined"), " does not match it");
  }
  backwardFrom(*agent_, id_, roots).value();
}

void setLocalBackward(RpcAgent& agent, LocalBackward localBackward) {
  detail::AgentInternals::impl(agent).gradients.setLocalBackward(
      std::make_shared<const LocalBackward>(std::move(localBackward)));
}

int64_t currentContextId() {
  return tlsContext;
}

void accumulateGradient(RpcAgent& agent, int64_t contextId, const RRef<Tensor>& param,
                        const Tensor& grad) {
  C10D_CHECK(param.defined() && param.isOwner(), InvalidArgument,
             "dist autograd: accumulateGradient of ",
             param.defined() ? param.describe() : "an empty RRef", " on worker '",
             agent.self().name, "', which does not own it");
  C10D_CHECK(grad.defined() && grad.device().isCPU() && grad.isContiguous(), InvalidArgument,
             "dist autograd: gradient for ", param.describe(), " is ",
             grad.defined() ? grad.describe() : std::string("undefined"),
             "; it needs a contiguous CPU tensor");
  addGradient(detail::AgentInternals::impl(agent), contextId, param.coreHandle()->id(),
              param.localValue(), grad);
}

namespace detail {

Future<Packed> callInContext(RpcAgent& agent, int64_t contextId, int to,
                             const std::string& function, Packed arguments) {
  RpcAgent::Impl& impl = AgentInternals::impl(agent);
  C10D_CHECK(contextId >= 0, InvalidArgument, "dist autograd: a call of '", function,
             "' in context ", contextId,
             ": not a context (currentContextId() outside a call in one?)");
  const int64_t message = impl.gradients.newId(impl.self.id);
  impl.gradients.record(contextId, true, message, to, arguments.tensors);
  Packed call = pack(std::make_tuple(contextId, message, function, arguments.bytes));
  call.tensors = std::move(arguments.tensors);
  Future<Packed> reply;
  reply.setExecutor(
      [&agent](std::function<void()> task) { AgentInternals::runOnPool(agent, std::move(task)); });
  AgentInternals::callRaw(
      agent, to, kCall, std::move(call), agent.options().timeout,
      [reply, &impl, contextId, message, to](std::exception_ptr error, Packed* result) mutable {
        if (error) {
          reply.setError(error);
          return;
        }
        impl.gradients.record(contextId, false, message, to, result->tensors);
        reply.setValue(std::move(*result));
      });
  return reply;
}

}  // namespace detail

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
  // A worker called in a context passes its release on to the workers it called in turn (a
  // released context touches nothing, so a cycle ends); nobody waits for those.
  RpcAgent* self = &agent;
  detail::AgentInternals::registerBuiltin(agent, kRelease, [impl, self](int64_t context) {
    const int from = detail::RRefScope::current() ? detail::RRefScope::current()->peer : -1;
    for (int worker : impl->gradients.release(context)) {
      if (worker == impl->self.id || worker == from || impl->shutDown.load()) continue;
      detail::AgentInternals::call<void>(*self, worker, kRelease, self->options().timeout,
                                         [&] { return pack(std::make_tuple(context)); });
    }
  });
  detail::AgentInternals::registerBuiltinAsync(agent, kCall,
                                               [impl](Packed& arguments, RpcAgent::Reply reply) {
                                                 serveCall(*impl, arguments, std::move(reply));
                                               });
  detail::AgentInternals::registerBuiltin(
      agent, kBackward,
      [impl, self](int64_t context, int64_t message, const std::vector<Tensor>& grads) {
        GradientContexts::Edge edge = impl->gradients.sent(context, message);
        C10D_CHECK(grads.size() == edge.tensors.size(), InvalidArgument,
                   "dist autograd backward of context ", context, ": ", grads.size(),
                   " gradients for the ", edge.tensors.size(), " tensors of message ", message);
        std::vector<std::pair<Tensor, Tensor>> seeds;
        for (size_t i = 0; i < grads.size(); ++i) seeds.emplace_back(edge.tensors[i], grads[i]);
        return backwardFrom(*self, context, std::move(seeds));
      });
}

}  // namespace c10d::inline v1::rpc
