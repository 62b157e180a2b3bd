// ProcessGroup itself: the backend spec, construction (a backend per device type, the group's
// C10D_DEBUG level and flight recorder), shutdown, rank translation, the backend of a device, and
// the public operations, each of which validates its arguments (c10d/ProcessGroupChecks.hpp) and
// then starts on its backend under checked (c10d/ProcessGroupInstrumentation.hpp). Subgroups are
// made in c10d/Subgroups.cpp; monitoredBarrier is in c10d/MonitoredBarrier.cpp.

#include "c10d/ProcessGroup.hpp"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <sstream>

#include "c10d/CollectiveCheck.hpp"
#include "c10d/GroupTrace.hpp"
#include "c10d/HostStaging.hpp"
#include "c10d/ProcessGroupChecks.hpp"
#include "c10d/ProcessGroupInstrumentation.hpp"
#include "c10d/core/Config.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "store/PrefixStore.hpp"

namespace c10d::inline v1 {
namespace {

// Once per process: a C10D_* variable the library does not know is most likely a typo of one it
// does, which would otherwise be ignored without a word.
void warnAboutUnknownVariablesOnce() {
  static const bool warned = [] {
    for (const std::string& name : config::unknownEnvironmentNames()) {
      C10D_LOG(Warning, "the environment sets ", name,
               ", which c10d does not read (misspelt? `c10d-config` lists the variables)");
    }
    return true;
  }();
  (void)warned;
}

std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t");
  size_t end = text.find_last_not_of(" \t");
  return begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
}

}  // namespace

std::map<DeviceType, std::string> parseBackendSpec(const std::string& spec) {
  std::map<DeviceType, std::string> result;
  std::string trimmed = trim(spec);
  C10D_CHECK(!trimmed.empty(), InvalidArgument,
             "empty backend spec; expected e.g. 'gloo' or "
             "'cpu:gloo,cuda:nccl'");
  if (trimmed.find(':') == std::string::npos) {
    result[DeviceType::CPU] = trimmed;
    result[DeviceType::CUDA] = trimmed;
    return result;
  }
  std::istringstream in(trimmed);
  std::string item;
  while (std::getline(in, item, ',')) {
    item = trim(item);
    size_t colon = item.find(':');
    C10D_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < item.size(), InvalidArgument,
               "backend spec '", spec, "': item '", item, "' is not device:backend");
    std::string device = trim(item.substr(0, colon));
    std::string backend = trim(item.substr(colon + 1));
    DeviceType type;
    if (device == "cpu") {
      type = DeviceType::CPU;
    } else if (device == "cuda") {
      type = DeviceType::CUDA;
    } else {
      C10D_THROW(InvalidArgument, "backend spec '", spec, "': unknown device type '", device,
                 "' (expected cpu or cuda)");
    }
    C10D_CHECK(result.count(type) == 0, InvalidArgument, "backend spec '", spec, "' names ", device,
               " twice");
    result[type] = backend;
  }
  return result;
}

ProcessGroup::ProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                           ProcessGroupOptions options)
    : ProcessGroup(std::move(store), rank, size, std::move(options), {}) {}

ProcessGroup::ProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                           ProcessGroupOptions options,
                           const std::map<std::string, std::shared_ptr<void>>& fromParent)
    : state_(
          std::make_unique<detail::GroupState>(std::move(store), rank, size, std::move(options))) {
  detail::GroupState& s = *state_;
  C10D_CHECK(s.store != nullptr, InvalidArgument, "ProcessGroup: null store");
  C10D_CHECK(s.size >= 1, InvalidArgument, "ProcessGroup: size must be >= 1, got ", s.size);
  C10D_CHECK(s.rank >= 0 && s.rank < s.size, InvalidArgument, "ProcessGroup: rank ", s.rank,
             " out of range [0, ", s.size, ")");
  C10D_CHECK(s.options.timeout.count() > 0, InvalidArgument,
             "ProcessGroup: timeout must be positive, got ", s.options.timeout.count(), " ms");
  if (s.options.localRank < 0) s.options.localRank = config::launcherLocalRank().value_or(-1);
  // Every variable the group reads is checked here, at its creation, whether or not this
  // group's code paths read it later, so a typo fails at the front door.
  const config::Settings settings(s.options.config);
  settings.checkAll();
  warnAboutUnknownVariablesOnce();
  const DebugLevel debug = debugLevel(settings);
  s.debugDetail = debug == DebugLevel::Detail;
  s.trace = std::make_shared<detail::GroupTrace>(
      s.options.groupName, s.rank, s.size, debug,
      static_cast<size_t>(settings.integer("C10D_FLIGHT_RECORDER_SIZE")));
  s.globalRanks.resize(s.size);
  std::iota(s.globalRanks.begin(), s.globalRanks.end(), 0);
  // One backend object per distinct name, shared by the device types it serves.
  std::map<std::string, std::shared_ptr<Backend>> byName;
  for (const auto& [device, name] : parseBackendSpec(s.options.backend)) {
    auto& backend = byName[name];
    if (!backend) {
      auto parentPart = fromParent.find(name);
      BackendContext context{
          std::make_shared<PrefixStore>(s.options.groupName + "/" + name, s.store),
          s.rank,
          s.size,
          s.options.timeout,
          s.options.groupName,
          parentPart == fromParent.end() ? nullptr : parentPart->second,
          settings,
          s.options.localRank,
          s.trace};
      backend = createBackend(name, context);
    }
    s.backends[device] = backend;
    // A backend that moves only CPU tensors still serves CUDA ones, through host memory.
    s.routes[device] = backend->handlesDevice(device) || !backend->handlesDevice(DeviceType::CPU)
                           ? backend
                           : std::make_shared<HostStagingBackend>(backend);
    s.routed[static_cast<size_t>(device)] = s.routes[device].get();
  }
  C10D_LOG(Info, "process group '", s.options.groupName, "' rank ", s.rank, " of ", s.size,
           " backends ", s.options.backend);
  if (debug != DebugLevel::Off) {
    logLine(LogLevel::Info, detail::concat("process group '", s.options.groupName, "': rank ",
                                           s.rank, " of ", s.size, ", backend '", s.options.backend,
                                           "', timeout ", s.options.timeout.count(),
                                           " ms, C10D_DEBUG=", s.debugDetail ? "DETAIL" : "INFO"));
  }
  if (s.debugDetail && !s.options.storeIsShared && s.backends.count(DeviceType::CPU) == 0) {
    C10D_THROW(InvalidArgument, "C10D_DEBUG=DETAIL checks collectives over the group's store, ",
               "or without a shared store over its CPU backend, and group '", s.options.groupName,
               "' (backend '", s.options.backend, "') has neither; use e.g. ",
               "C10D_BACKEND=cpu:gloo,cuda:nccl");
  }
}

ProcessGroup::ProcessGroup(NonMember, std::string groupName)
    : state_(std::make_unique<detail::GroupState>(nullptr, -1, 0, ProcessGroupOptions{})) {
  state_->member = false;
  state_->options.groupName = std::move(groupName);
  state_->options.backend.clear();
  // Its errors name the group too.
  state_->trace =
      std::make_shared<detail::GroupTrace>(state_->options.groupName, -1, 0, DebugLevel::Off, 0);
}

ProcessGroup::~ProcessGroup() {
  shutdown();
}

int ProcessGroup::rank() const {
  return state_->rank;
}
int ProcessGroup::size() const {
  return state_->size;
}
const std::string& ProcessGroup::groupName() const {
  return state_->options.groupName;
}
const std::string& ProcessGroup::backendSpec() const {
  return state_->options.backend;
}
std::chrono::milliseconds ProcessGroup::timeout() const {
  return state_->options.timeout;
}
bool ProcessGroup::isMember() const {
  return state_->member;
}
int ProcessGroup::localRank() const {
  return state_->options.localRank;
}
const std::vector<int>& ProcessGroup::globalRanks() const {
  return state_->globalRanks;
}
std::shared_ptr<Store> ProcessGroup::store() const {
  return state_->store;
}

void ProcessGroup::retire(const std::string& reason) {
  std::vector<std::shared_ptr<ProcessGroup>> made;
  {
    std::lock_guard<std::mutex> guard(state_->subgroupsMutex);
    for (const auto& weak : state_->subgroups) {
      if (auto group = weak.lock()) made.push_back(std::move(group));
    }
  }
  for (const auto& group : made) group->retire(reason);
  if (!state_->shutdown.load()) state_->retiredBecause = reason;
  stopBackends(&reason);
}

void ProcessGroup::shutdown() {
  stopBackends(nullptr);
}

void ProcessGroup::stopBackends(const std::string* abortBecause) {
  if (state_->shutdown.exchange(true)) return;
  std::map<Backend*, std::shared_ptr<Backend>> distinct;
  for (auto& [device, backend] : state_->backends) distinct[backend.get()] = backend;
  for (auto& [raw, backend] : distinct) {
    try {
      if (abortBecause != nullptr) {
        backend->abort(*abortBecause);
      } else {
        backend->shutdown();
      }
    } catch (const std::exception& e) {
      C10D_LOG(Warning, "process group '", state_->options.groupName, "': backend ",
               backend->name(), " shutdown failed: ", e.what());
    }
  }
}

int ProcessGroup::globalRank(int groupRank) const {
  checkRank(groupRank, "rank", "globalRank");
  return state_->globalRanks[groupRank];
}

std::optional<int> ProcessGroup::groupRank(int globalRank) const {
  auto it = std::find(state_->globalRanks.begin(), state_->globalRanks.end(), globalRank);
  if (it == state_->globalRanks.end()) return std::nullopt;
  return static_cast<int>(it - state_->globalRanks.begin());
}

std::shared_ptr<Backend> ProcessGroup::backend(DeviceType device) const {
  auto it = state_->backends.find(device);
  C10D_CHECK(it != state_->backends.end(), InvalidArgument, "process group '",
             state_->options.groupName, "' has no backend for ", name(device),
             " tensors (backend spec '", state_->options.backend,
             "'); use e.g. C10D_BACKEND=cpu:gloo,cuda:nccl");
  return it->second;
}

std::shared_ptr<Work> ProcessGroup::broadcast(const Tensor& tensor,
                                              const BroadcastOptions& options) {
  return withErrorContext("broadcast", -1, [&] {
    Backend& backend = route(tensor, "broadcast");
    checkRank(options.rootRank, "root", "broadcast");
    Op op = Op::on(OpType::Broadcast, tensor, resolve(options.timeout, "broadcast"));
    op.root = options.rootRank;
    return issue(backend, op, {.input = &tensor}, tensor.nbytes());
  });
}

std::shared_ptr<Work> ProcessGroup::allreduce(const Tensor& tensor,
                                              const AllreduceOptions& options) {
  return withErrorContext("allreduce", -1, [&] {
    Backend& backend = route(tensor, "allreduce");
    checkReduceOp(options.reduceOp, tensor.dtype(), "allreduce");
    Op op = Op::on(OpType::Allreduce, tensor, resolve(options.timeout, "allreduce"));
    op.reduceOp = options.reduceOp;
    return issue(backend, op, {.input = &tensor}, tensor.nbytes());
  });
}

std::shared_ptr<Work> ProcessGroup::allreduceCoalesced(const std::vector<Tensor>& tensors,
                                                       const AllreduceOptions& options) {
  return withErrorContext("allreduce_coalesced", -1, [&] {
    C10D_CHECK(!tensors.empty(), InvalidArgument, "allreduce_coalesced: no tensors");
    Backend& backend = route(tensors[0], "allreduce_coalesced");
    int64_t count = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      detail::checkTensor(tensors[i], "allreduce_coalesced", "a");
      detail::checkSameKind(tensors[0], tensors[i], "allreduce_coalesced",
                            "tensor " + std::to_string(i));
      count += tensors[i].numel();
      bytes += tensors[i].nbytes();
    }
    checkReduceOp(options.reduceOp, tensors[0].dtype(), "allreduce_coalesced");
    Op op = Op::on(OpType::AllreduceCoalesced, tensors[0],
                   resolve(options.timeout, "allreduce_coalesced"));
    op.count = count;
    op.tensors = static_cast<int32_t>(tensors.size());
    op.reduceOp = options.reduceOp;
    return issue(backend, op, {.inputs = &tensors}, bytes);
  });
}

std::shared_ptr<Work> ProcessGroup::reduce(const Tensor& tensor, const ReduceOptions& options) {
  return withErrorContext("reduce", -1, [&] {
    Backend& backend = route(tensor, "reduce");
    checkRank(options.rootRank, "root", "reduce");
    checkReduceOp(options.reduceOp, tensor.dtype(), "reduce");
    Op op = Op::on(OpType::Reduce, tensor, resolve(options.timeout, "reduce"));
    op.root = options.rootRank;
    op.reduceOp = options.reduceOp;
    return issue(backend, op, {.input = &tensor}, tensor.nbytes());
  });
}

std::shared_ptr<Work> ProcessGroup::allgather(const std::vector<Tensor>& outputs,
                                              const Tensor& input,
                                              const AllgatherOptions& options) {
  return withErrorContext("allgather", -1, [&] {
    Backend& backend = route(input, "allgather");
    detail::checkList(outputs, state_->size, "allgather", "output");
    for (int r = 0; r < state_->size; ++r) {
      detail::checkTensor(outputs[r], "allgather", "output");
      detail::checkSameShape(input, outputs[r], "allgather", "output " + std::to_string(r));
    }
    Op op = Op::on(OpType::Allgather, input, resolve(options.timeout, "allgather"));
    return issue(backend, op, {.input = &input, .outputs = &outputs},
                 input.nbytes() * state_->size);
  });
}

std::shared_ptr<Work> ProcessGroup::allgatherIntoTensor(const Tensor& output, const Tensor& input,
                                                        const AllgatherOptions& options) {
  return withErrorContext("allgather_into_tensor", -1, [&] {
    Backend& backend = route(input, "allgather_into_tensor");
    detail::checkTensor(output, "allgather_into_tensor", "output");
    detail::checkSameKind(input, output, "allgather_into_tensor", "output");
    C10D_CHECK(output.numel() == input.numel() * state_->size, InvalidArgument,
               "allgather_into_tensor: output ", output.describe(), " must have size() * ",
               input.numel(), " = ", input.numel() * state_->size, " elements");
    Op op = Op::on(OpType::AllgatherIntoTensor, input,
                   resolve(options.timeout, "allgather_into_tensor"));
    return issue(backend, op, {.input = &input, .output = &output}, input.nbytes() * state_->size);
  });
}

std::shared_ptr<Work> ProcessGroup::gather(const std::vector<Tensor>& outputs, const Tensor& input,
                                           const GatherOptions& options) {
  return withErrorContext("gather", -1, [&] {
    Backend& backend = route(input, "gather");
    checkRank(options.rootRank, "root", "gather");
    detail::checkRootList(outputs, input, state_->rank, options.rootRank, state_->size, "gather",
                          "output");
    Op op = Op::on(OpType::Gather, input, resolve(options.timeout, "gather"));
    op.root = options.rootRank;
    return issue(backend, op, {.input = &input, .outputs = &outputs},
                 input.nbytes() * state_->size);
  });
}

std::shared_ptr<Work> ProcessGroup::scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                            const ScatterOptions& options) {
  return withErrorContext("scatter", -1, [&] {
    Backend& backend = route(output, "scatter");
    checkRank(options.rootRank, "root", "scatter");
    detail::checkRootList(inputs, output, state_->rank, options.rootRank, state_->size, "scatter",
                          "input");
    Op op = Op::on(OpType::Scatter, output, resolve(options.timeout, "scatter"));
    op.root = options.rootRank;
    return issue(backend, op, {.output = &output, .inputs = &inputs},
                 output.nbytes() * state_->size);
  });
}

std::shared_ptr<Work> ProcessGroup::reduceScatter(const Tensor& output,
                                                  const std::vector<Tensor>& inputs,
                                                  const ReduceScatterOptions& options) {
  return withErrorContext("reduce_scatter", -1, [&] {
    Backend& backend = route(output, "reduce_scatter");
    detail::checkList(inputs, state_->size, "reduce_scatter", "input");
    for (int r = 0; r < state_->size; ++r) {
      detail::checkTensor(inputs[r], "reduce_scatter", "input");
      detail::checkSameShape(output, inputs[r], "reduce_scatter", "input " + std::to_string(r));
    }
    checkReduceOp(options.reduceOp, output.dtype(), "reduce_scatter");
    Op op = Op::on(OpType::ReduceScatter, output, resolve(options.timeout, "reduce_scatter"));
    op.reduceOp = options.reduceOp;
    return issue(backend, op, {.output = &output, .inputs = &inputs},
                 output.nbytes() * state_->size);
  });
}

std::shared_ptr<Work> ProcessGroup::reduceScatterTensor(const Tensor& output, const Tensor& input,
                                                        const ReduceScatterOptions& options) {
  return withErrorContext("reduce_scatter_tensor", -1, [&] {
    Backend& backend = route(output, "reduce_scatter_tensor");
    detail::checkTensor(input, "reduce_scatter_tensor", "input");
    detail::checkSameKind(output, input, "reduce_scatter_tensor", "input");
    C10D_CHECK(input.numel() == output.numel() * state_->size, InvalidArgument,
               "reduce_scatter_tensor: input ", input.describe(), " must have size() * ",
               output.numel(), " = ", output.numel() * state_->size, " elements");
    checkReduceOp(options.reduceOp, output.dtype(), "reduce_scatter_tensor");
    Op op = Op::on(OpType::ReduceScatterTensor, output,
                   resolve(options.timeout, "reduce_scatter_tensor"));
    op.reduceOp = options.reduceOp;
    return issue(backend, op, {.input = &input, .output = &output}, output.nbytes() * state_->size);
  });
}

std::shared_ptr<Work> ProcessGroup::alltoall(const std::vector<Tensor>& outputs,
                                             const std::vector<Tensor>& inputs,
                                             const AllToAllOptions& options) {
  return withErrorContext("alltoall", -1, [&] {
    detail::checkList(inputs, state_->size, "alltoall", "input");
    detail::checkList(outputs, state_->size, "alltoall", "output");
    Backend& backend = route(inputs[0], "alltoall");
    uint64_t bytes = 0;
    for (int r = 0; r < state_->size; ++r) {
      detail::checkTensor(inputs[r], "alltoall", "input");
      detail::checkTensor(outputs[r], "alltoall", "output");
      detail::checkSameKind(inputs[0], inputs[r], "alltoall", "input " + std::to_string(r));
      detail::checkSameKind(inputs[0], outputs[r], "alltoall", "output " + std::to_string(r));
      bytes += inputs[r].nbytes();
    }
    Op op = Op::on(OpType::Alltoall, inputs[0], resolve(options.timeout, "alltoall"));
    op.count = 0;  // each rank's lists may hold any sizes
    op.tensors = static_cast<int32_t>(inputs.size());
    return issue(backend, op, {.inputs = &inputs, .outputs = &outputs}, bytes);
  });
}

std::shared_ptr<Work> ProcessGroup::alltoallBase(const Tensor& output, const Tensor& input,
                                                 const std::vector<int64_t>& outputSplitSizes,
                                                 const std::vector<int64_t>& inputSplitSizes,
                                                 const AllToAllOptions& options) {
  return withErrorContext("alltoall_base", -1, [&] {
    Backend& backend = route(input, "alltoall_base");
    detail::checkTensor(output, "alltoall_base", "output");
    detail::checkSameKind(input, output, "alltoall_base", "output");
    detail::checkAlltoallSplits(output, input, outputSplitSizes, inputSplitSizes, state_->rank,
                                state_->size);
    Op op = Op::on(OpType::AlltoallBase, input, resolve(options.timeout, "alltoall_base"));
    const bool equal = outputSplitSizes.empty() && inputSplitSizes.empty();
    if (!equal) op.count = 0;  // uneven splits: ranks' counts differ
    return issue(backend, op,
                 {.input = &input,
                  .output = &output,
                  .inputSplits = &inputSplitSizes,
                  .outputSplits = &outputSplitSizes},
                 input.nbytes());
  });
}

std::shared_ptr<Work> ProcessGroup::barrier(const BarrierOptions& options) {
  return withErrorContext("barrier", -1, [&] {
    checkUsable("barrier");
    Backend* cpu = state_->routed[static_cast<size_t>(DeviceType::CPU)];
    if (cpu == nullptr) backend(DeviceType::CPU);  // throws, naming the spec
    Op op;
    op.type = OpType::Barrier;
    op.timeout = resolve(options.timeout, "barrier");
    return issue(*cpu, op, {}, 0);
  });
}

std::shared_ptr<Work> ProcessGroup::send(const Tensor& tensor, int dstRank,
                                         const SendOptions& options) {
  const int tag = options.tag;
  return withErrorContext("send", dstRank, [&] {
    Backend& backend = route(tensor, "send");
    checkRank(dstRank, "destination", "send");
    C10D_CHECK(tag >= 0, InvalidArgument, "send: tag must be >= 0, got ", tag);
    C10D_CHECK(dstRank != state_->rank, InvalidArgument, "send: rank ", state_->rank,
               " cannot send to itself");
    Op op = Op::on(OpType::Send, tensor, resolve(options.timeout, "send"));
    op.peer = dstRank;
    op.tag = tag;
    return issue(backend, op, {.input = &tensor}, tensor.nbytes());
  });
}

std::shared_ptr<Work> ProcessGroup::recv(const Tensor& tensor, int srcRank,
                                         const RecvOptions& options) {
  const int tag = options.tag;
  return withErrorContext("recv", srcRank, [&] {
    Backend& backend = route(tensor, "recv");
    checkRank(srcRank, "source", "recv");
    C10D_CHECK(tag >= 0, InvalidArgument, "recv: tag must be >= 0, got ", tag);
    C10D_CHECK(srcRank != state_->rank, InvalidArgument, "recv: rank ", state_->rank,
               " cannot receive from itself");
    Op op = Op::on(OpType::Recv, tensor, resolve(options.timeout, "recv"));
    op.peer = srcRank;
    op.tag = tag;
    return issue(backend, op, {.input = &tensor}, tensor.nbytes());
  });
}

std::shared_ptr<Work> ProcessGroup::recvAnysource(const Tensor& tensor,
                                                  const RecvOptions& options) {
  const int tag = options.tag;
  return withErrorContext("recv_anysource", -1, [&] {
    Backend& backend = route(tensor, "recv_anysource");
    C10D_CHECK(tag >= 0, InvalidArgument, "recv_anysource: tag must be >= 0, got ", tag);
    C10D_CHECK(state_->size > 1, InvalidArgument, "recv_anysource ", tensor.describe(), " tag ",
               tag, " (group '", state_->options.groupName,
               "'): a group of one has nobody to receive from");
    Op op = Op::on(OpType::RecvAnysource, tensor, resolve(options.timeout, "recv_anysource"));
    op.tag = tag;
    return issue(backend, op, {.input = &tensor}, tensor.nbytes());
  });
}

std::vector<std::shared_ptr<Work>> ProcessGroup::batchIsendIrecv(const std::vector<P2POp>& ops,
                                                                 const BatchP2POptions& options) {
  return withErrorContext("batch_isend_irecv", -1, [&] {
    C10D_CHECK(!ops.empty(), InvalidArgument, "batch_isend_irecv: no operations");
    Backend& backend = route(ops[0].tensor, "batch_isend_irecv");
    for (const P2POp& op : ops) {
      detail::checkTensor(op.tensor, "batch_isend_irecv", op.kind == P2POp::Send ? "send" : "recv");
      C10D_CHECK(op.tensor.device() == ops[0].tensor.device(), InvalidArgument,
                 "batch_isend_irecv: all tensors must be on one device");
      checkRank(op.peer, op.kind == P2POp::Send ? "destination" : "source", "batch_isend_irecv");
      C10D_CHECK(op.tag >= 0, InvalidArgument, "batch_isend_irecv: tag must be >= 0");
      C10D_CHECK(op.peer != state_->rank, InvalidArgument, "batch_isend_irecv: rank ", state_->rank,
                 op.kind == P2POp::Send ? " cannot send to itself" : " cannot receive from itself");
    }
    const std::chrono::milliseconds timeout = resolve(options.timeout, "batch_isend_irecv");
    std::vector<Op> described;
    described.reserve(ops.size());
    for (const P2POp& p2p : ops) {
      Op op = Op::on(p2p.kind == P2POp::Send ? OpType::Send : OpType::Recv, p2p.tensor, timeout);
      op.peer = p2p.peer;
      op.tag = p2p.tag;
      op.seq = state_->pointToPoint.fetch_add(1, std::memory_order_relaxed);
      described.push_back(op);
    }
    for (const Op& op : described) state_->trace->issued(op, true);
    std::vector<std::shared_ptr<Work>> works;
    try {
      works = backend.startBatch(described, ops);
    } catch (const std::exception& e) {
      for (const Op& op : described) state_->trace->failedBeforeStart(op, e.what());
      throw;
    }
    for (size_t i = 0; i < works.size() && i < ops.size(); ++i) {
      countTraffic(described[i].type, ops[i].tensor.nbytes());
      if (i == 0 || works[i] != works[i - 1]) {
        works[i]->bind(described[i], state_->trace);
        continue;
      }
      // One Work for several ops (a backend that fuses the batch): the later ones are recorded
      // as it completes, when anything records them (GroupTrace::finished does nothing else).
      if (!state_->trace->recorder() && !state_->trace->timesOps()) continue;
      works[i]->getFuture()->addCompletionHook(
          [trace = state_->trace, op = described[i], start = std::chrono::steady_clock::now()](
              Future& done) { trace->finished(op, done.error(), start); });
    }
    return works;
  });
}

}  // namespace c10d::inline v1
