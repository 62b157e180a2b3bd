#include "c10d/Backend.hpp"

#include <map>
#include <mutex>

#include "c10d/BackendLibrary.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

void Backend::unsupported(const char* op) const {
  C10D_THROW(BackendError, "backend ", name_, " does not support ", op);
}

std::shared_ptr<Work> Backend::start(const Op& op, const OpTensors& t) {
  const std::chrono::milliseconds timeout = op.timeout;
  switch (op.type) {
    case OpType::Broadcast:
      return broadcast(*t.input, {.rootRank = op.root, .timeout = timeout});
    case OpType::Allreduce:
      return allreduce(*t.input, {.reduceOp = op.reduceOp, .timeout = timeout});
    case OpType::AllreduceCoalesced:
      return allreduceCoalesced(*t.inputs, {.reduceOp = op.reduceOp, .timeout = timeout});
    case OpType::Reduce:
      return reduce(*t.input, {.reduceOp = op.reduceOp, .rootRank = op.root, .timeout = timeout});
    case OpType::Allgather:
      return allgather(*t.outputs, *t.input, {.timeout = timeout});
    case OpType::AllgatherIntoTensor:
      return allgatherIntoTensor(*t.output, *t.input, {.timeout = timeout});
    case OpType::Gather:
      return gather(*t.outputs, *t.input, {.rootRank = op.root, .timeout = timeout});
    case OpType::Scatter:
      return scatter(*t.output, *t.inputs, {.rootRank = op.root, .timeout = timeout});
    case OpType::ReduceScatter:
      return reduceScatter(*t.output, *t.inputs, {.reduceOp = op.reduceOp, .timeout = timeout});
    case OpType::ReduceScatterTensor:
      return reduceScatterTensor(*t.output, *t.input,
                                 {.reduceOp = op.reduceOp, .timeout = timeout});
    case OpType::Alltoall:
      return alltoall(*t.outputs, *t.inputs, {.timeout = timeout});
    case OpType::AlltoallBase:
      return alltoallBase(*t.output, *t.input, *t.outputSplits, *t.inputSplits,
                          {.timeout = timeout});
    case OpType::Barrier:
      return barrier({.timeout = timeout});
    case OpType::Send:
      return send(*t.input, op.peer, op.tag, timeout);
    case OpType::Recv:
      return recv(*t.input, op.peer, op.tag, timeout);
    case OpType::RecvAnysource:
      return recvAnysource(*t.input, op.tag, timeout);
  }
  unsupported(std::string(c10d::name(op.type)).c_str());
}

std::vector<std::shared_ptr<Work>> Backend::startBatch(const std::vector<Op>& ops,
                                                       const std::vector<P2POp>& p2p) {
  return batchIsendIrecv(p2p, ops.empty() ? std::chrono::milliseconds(0) : ops[0].timeout);
}

std::shared_ptr<Work> Backend::broadcast(const Tensor&, const BroadcastOptions&) {
  unsupported("broadcast");
}
std::shared_ptr<Work> Backend::allreduce(const Tensor&, const AllreduceOptions&) {
  unsupported("allreduce");
}
std::shared_ptr<Work> Backend::allreduceCoalesced(const std::vector<Tensor>&,
                                                  const AllreduceOptions&) {
  unsupported("allreduce_coalesced");
}
std::shared_ptr<Work> Backend::reduce(const Tensor&, const ReduceOptions&) {
  unsupported("reduce");
}
std::shared_ptr<Work> Backend::allgather(const std::vector<Tensor>&, const Tensor&,
                                         const AllgatherOptions&) {
  unsupported("allgather");
}
std::shared_ptr<Work> Backend::allgatherIntoTensor(const Tensor&, const Tensor&,
                                                   const AllgatherOptions&) {
  unsupported("allgather_into_tensor");
}
std::shared_ptr<Work> Backend::gather(const std::vector<Tensor>&, const Tensor&,
                                      const GatherOptions&) {
  unsupported("gather");
}
std::shared_ptr<Work> Backend::scatter(const Tensor&, const std::vector<Tensor>&,
                                       const ScatterOptions&) {
  unsupported("scatter");
}
std::shared_ptr<Work> Backend::reduceScatter(const Tensor&, const std::vector<Tensor>&,
                                             const ReduceScatterOptions&) {
  unsupported("reduce_scatter");
}
std::shared_ptr<Work> Backend::reduceScatterTensor(const Tensor&, const Tensor&,
                                                   const ReduceScatterOptions&) {
  unsupported("reduce_scatter_tensor");
}
std::shared_ptr<Work> Backend::alltoall(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                        const AllToAllOptions&) {
  unsupported("alltoall");
}
std::shared_ptr<Work> Backend::alltoallBase(const Tensor&, const Tensor&,
                                            const std::vector<int64_t>&,
                                            const std::vector<int64_t>&, const AllToAllOptions&) {
  unsupported("alltoall_base");
}
std::shared_ptr<Work> Backend::barrier(const BarrierOptions&) {
  unsupported("barrier");
}
std::shared_ptr<Work> Backend::send(const Tensor&, int, int, std::chrono::milliseconds) {
  unsupported("send");
}
std::shared_ptr<Work> Backend::recv(const Tensor&, int, int, std::chrono::milliseconds) {
  unsupported("recv");
}
std::shared_ptr<Work> Backend::recvAnysource(const Tensor&, int, std::chrono::milliseconds) {
  unsupported("recv_anysource");
}
std::vector<std::shared_ptr<Work>> Backend::batchIsendIrecv(const std::vector<P2POp>&,
                                                            std::chrono::milliseconds) {
  unsupported("batch_isend_irecv");
}
std::vector<std::shared_ptr<Work>> Backend::postEachInTurn(const std::vector<P2POp>& ops,
                                                           std::chrono::milliseconds timeout) {
  std::vector<std::shared_ptr<Work>> works;
  works.reserve(ops.size());
  for (const P2POp& op : ops) {
    works.push_back(op.kind == P2POp::Send ? send(op.tensor, op.peer, op.tag, timeout)
                                           : recv(op.tensor, op.peer, op.tag, timeout));
  }
  return works;
}

std::shared_ptr<void> Backend::splitForSubgroup(const std::vector<int>&) {
  return nullptr;
}

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, BackendFactory> factories;

  // The backends built into this library register themselves as it loads (Gloo: in
  // backends/gloo/GlooBackend.cpp); those built as their own libraries are known by name here and
  // loaded at their first use.
  Registry() {
    for (const detail::BackendLibrary& library : detail::backendLibraries()) {
      factories[library.backend] = [&library](const BackendContext& context) {
        return detail::createFromLibrary(library, context);
      };
    }
  }
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

void registerBackend(const std::string& name, BackendFactory factory) {
  C10D_CHECK(!name.empty() && factory != nullptr, InvalidArgument,
             "registerBackend: need a name and a factory");
  Registry& r = registry();
  std::lock_guard<std::mutex> guard(r.mutex);
  C10D_CHECK(r.factories.count(name) == 0, InvalidArgument, "registerBackend: backend '", name,
             "' is already registered");
  r.factories[name] = std::move(factory);
}

bool isBackendRegistered(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> guard(r.mutex);
  return r.factories.count(name) > 0;
}

std::vector<std::string> registeredBackends() {
  Registry& r = registry();
  std::lock_guard<std::mutex> guard(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

namespace {

// The factory registered as name; throws InvalidArgument naming it and the registered ones.
BackendFactory factoryOf(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> guard(r.mutex);
  auto it = r.factories.find(name);
  if (it == r.factories.end()) {
    std::string known;
    for (const auto& [n, f] : r.factories) known += (known.empty() ? "" : ", ") + n;
    C10D_THROW(InvalidArgument, "unknown backend '", name,
               "'; registered: ", known.empty() ? "none" : known,
               ". A program can add its own with c10d::registerBackend.");
  }
  return it->second;
}

}  // namespace

void requireBackend(const std::string& name) {
  factoryOf(name);
}

std::shared_ptr<Backend> createBackend(const std::string& name, const BackendContext& context) {
  std::shared_ptr<Backend> backend = factoryOf(name)(context);
  C10D_CHECK(backend != nullptr, BackendError, "the factory of backend '", name,
             "' returned no backend (rank ", context.rank, " of ", context.size,
             "); a factory returns its backend or throws");
  return backend;
}

}  // namespace c10d::inline v1
