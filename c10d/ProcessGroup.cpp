#include "c10d/ProcessGroup.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <numeric>
#include <sstream>

#include "c10d/HostStaging.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "store/PrefixStore.hpp"

namespace c10d::inline v0 {
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

// One ErrorContext per (group, rank) a process ever creates, never freed: Works point at it and
// may outlive their group. Groups are few; the set stays small.
const ErrorContext* internErrorContext(const std::string& group, int rank) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, std::unique_ptr<const ErrorContext>> interned;
  std::lock_guard<std::mutex> guard(mutex);
  auto& slot = interned[{group, rank}];
  if (!slot)
    slot = std::make_unique<const ErrorContext>(ErrorContext{.group = group, .rank = rank});
  return slot.get();
}

std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t");
  size_t end = text.find_last_not_of(" \t");
  return begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
}

std::string rankList(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
  out << "]";
  return out.str();
}

// Checks common to every tensor an op touches.
void checkTensor(const Tensor& tensor, const char* op, const char* role) {
  C10D_CHECK(tensor.defined(), InvalidArgument, op, ": ", role, " tensor is undefined");
  C10D_CHECK(tensor.isContiguous(), InvalidArgument, op, ": ", role, " tensor ", tensor.describe(),
             " is not contiguous; pass a contiguous copy");
  if (tensor.device().isCPU()) return;
  // Asked once: CUDA fixes the devices a process sees when it starts.
  static const int gpus = cudaDeviceCount();
  C10D_CHECK(gpus > 0, InvalidArgument, op, ": ", role, " tensor ", tensor.describe(),
             " is on a GPU but this process has no usable GPU (no CUDA device or driver, "
             "CUDA_VISIBLE_DEVICES hides them, or c10d was built without CUDA)");
  C10D_CHECK(tensor.device().index < gpus, InvalidArgument, op, ": ", role, " tensor ",
             tensor.describe(), " is on ", tensor.device(), " but this process sees ", gpus,
             " GPU(s)");
}

void checkSameKind(const Tensor& expected, const Tensor& actual, const char* op,
                   const std::string& role) {
  C10D_CHECK(actual.dtype() == expected.dtype() && actual.device() == expected.device(),
             InvalidArgument, op, ": ", role, " is ", actual.describe(), " but expected ",
             expected.dtype(), " on ", expected.device());
}

void checkSameShape(const Tensor& expected, const Tensor& actual, const char* op,
                    const std::string& role) {
  checkSameKind(expected, actual, op, role);
  C10D_CHECK(actual.numel() == expected.numel(), InvalidArgument, op, ": ", role, " is ",
             actual.describe(), " but must have ", expected.numel(), " elements like ",
             expected.describe());
}

void checkList(const std::vector<Tensor>& tensors, size_t expected, const char* op,
               const char* role) {
  C10D_CHECK(tensors.size() == expected, InvalidArgument, op, ": expected ", expected, " ", role,
             " tensors (one per rank), got ", tensors.size());
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
    : store_(std::move(store)), rank_(rank), size_(size), options_(std::move(options)) {
  C10D_CHECK(store_ != nullptr, InvalidArgument, "ProcessGroup: null store");
  C10D_CHECK(size_ >= 1, InvalidArgument, "ProcessGroup: size must be >= 1, got ", size_);
  C10D_CHECK(rank_ >= 0 && rank_ < size_, InvalidArgument, "ProcessGroup: rank ", rank_,
             " out of range [0, ", size_, ")");
  C10D_CHECK(options_.timeout.count() > 0, InvalidArgument,
             "ProcessGroup: timeout must be positive, got ", options_.timeout.count(), " ms");
  if (options_.localRank < 0) options_.localRank = config::launcherLocalRank().value_or(-1);
  // Every variable the group reads is checked here, at its creation, whether or not this
  // group's code paths read it later, so a typo fails at the front door.
  const config::Settings settings(options_.config);
  settings.checkAll();
  warnAboutUnknownVariablesOnce();
  errorContext_ = internErrorContext(options_.groupName, rank_);
  globalRanks_.resize(size_);
  std::iota(globalRanks_.begin(), globalRanks_.end(), 0);
  // One backend object per distinct name, shared by the device types it serves.
  std::map<std::string, std::shared_ptr<Backend>> byName;
  for (const auto& [device, name] : parseBackendSpec(options_.backend)) {
    auto& backend = byName[name];
    if (!backend) {
      auto parentPart = fromParent.find(name);
      BackendContext context{std::make_shared<PrefixStore>(options_.groupName + "/" + name, store_),
                             rank_,
                             size_,
                             options_.timeout,
                             options_.groupName,
                             parentPart == fromParent.end() ? nullptr : parentPart->second,
                             settings,
                             options_.localRank};
      backend = createBackend(name, context);
    }
    backends_[device] = backend;
    // A backend that moves only CPU tensors still serves CUDA ones, through host memory.
    routes_[device] = backend->handlesDevice(device) || !backend->handlesDevice(DeviceType::CPU)
                          ? backend
                          : std::make_shared<HostStagingBackend>(backend);
  }
  C10D_LOG(Info, "process group '", options_.groupName, "' rank ", rank_, " of ", size_,
           " backends ", options_.backend);
  debug_ = debugLevel(settings);
  if (debug_ != DebugLevel::Off) {
    logLine(LogLevel::Info,
            detail::concat("process group '", options_.groupName, "': rank ", rank_, " of ", size_,
                           ", backend '", options_.backend, "', timeout ", options_.timeout.count(),
                           " ms, C10D_DEBUG=", debug_ == DebugLevel::Detail ? "DETAIL" : "INFO"));
  }
  if (auto capacity = static_cast<size_t>(settings.integer("C10D_FLIGHT_RECORDER_SIZE"));
      capacity > 0) {
    recorder_ = std::make_shared<FlightRecorder>(options_.groupName, rank_, size_, capacity);
  }
  if (debug_ == DebugLevel::Detail && !options_.storeIsShared &&
      backends_.count(DeviceType::CPU) == 0) {
    C10D_THROW(InvalidArgument, "C10D_DEBUG=DETAIL checks collectives over the group's store, ",
               "or without a shared store over its CPU backend, and group '", options_.groupName,
               "' (backend '", options_.backend, "') has neither; use e.g. ",
               "C10D_BACKEND=cpu:gloo,cuda:nccl");
  }
}

ProcessGroup::ProcessGroup(NonMember, std::string groupName) : rank_(-1), size_(0), member_(false) {
  options_.groupName = std::move(groupName);
}

ProcessGroup::~ProcessGroup() {
  shutdown();
}

void ProcessGroup::shutdown() {
  if (shutdown_.exchange(true)) return;
  std::map<Backend*, std::shared_ptr<Backend>> distinct;
  for (auto& [device, backend] : backends_) distinct[backend.get()] = backend;
  for (auto& [raw, backend] : distinct) {
    try {
      backend->shutdown();
    } catch (const std::exception& e) {
      C10D_LOG(Warning, "process group '", options_.groupName, "': backend ", backend->name(),
               " shutdown failed: ", e.what());
    }
  }
}

int ProcessGroup::globalRank(int groupRank) const {
  checkRank(groupRank, "rank", "globalRank");
  return globalRanks_[groupRank];
}

std::optional<int> ProcessGroup::groupRank(int globalRank) const {
  auto it = std::find(globalRanks_.begin(), globalRanks_.end(), globalRank);
  if (it == globalRanks_.end()) return std::nullopt;
  return static_cast<int>(it - globalRanks_.begin());
}

std::shared_ptr<Backend> ProcessGroup::backend(DeviceType device) const {
  auto it = backends_.find(device);
  C10D_CHECK(it != backends_.end(), InvalidArgument, "process group '", options_.groupName,
             "' has no backend for ", name(device), " tensors (backend spec '", options_.backend,
             "'); use e.g. C10D_BACKEND=cpu:gloo,cuda:nccl");
  return it->second;
}

void ProcessGroup::checkUsable(const char* op) const {
  C10D_CHECK(member_, InvalidArgument, op, ": this process is not a member of group '",
             options_.groupName, "'");
  C10D_CHECK(!shutdown_.load(), StateError, op, ": process group '", options_.groupName,
             "' was shut down");
}

void ProcessGroup::checkRank(int rank, const char* what, const char* op) const {
  C10D_CHECK(rank >= 0 && rank < size_, InvalidArgument, op, ": ", what, " ", rank,
             " out of range [0, ", size_, ") of group '", options_.groupName, "'");
}

std::chrono::milliseconds ProcessGroup::resolve(std::chrono::milliseconds timeout,
                                                const char* op) const {
  if (timeout == kDefaultTimeout) return options_.timeout;
  C10D_CHECK(timeout.count() > 0, InvalidArgument, op, " in group '", options_.groupName,
             "': timeout must be positive, got ", timeout.count(),
             " ms (leave it unset for the group's timeout)");
  return timeout;
}

template <typename Body>
auto ProcessGroup::withErrorContext(const char* op, int peer, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (Error& e) {
    ErrorContext context = errorContext_ ? *errorContext_ : ErrorContext{};
    context.op = op;
    if (peer >= 0) context.peers = {peer};
    e.addContext(context);
    throw;
  }
}

std::shared_ptr<Work> ProcessGroup::withErrorContext(std::shared_ptr<Work> work, const char* op,
                                                     int peer) {
  work->setErrorContext(errorContext_, op, -1, peer);
  return work;
}

template <typename Issue>
std::shared_ptr<Work> ProcessGroup::checked(const char* op, const Tensor* tensor, int64_t tensors,
                                            int64_t root, std::optional<ReduceOp> reduceOp,
                                            std::chrono::milliseconds timeout, Issue&& issue) {
  const uint64_t sequence = collectives_.fetch_add(1);
  if (debug_ == DebugLevel::Off && !recorder_) {
    std::shared_ptr<Work> work = issue();
    work->setErrorContext(errorContext_, op, static_cast<int64_t>(sequence), -1);
    return work;
  }
  // The recorder writes the call into its own slot; a fingerprint of our own is built only for
  // what C10D_DEBUG needs (the DETAIL check and the log line).
  if (recorder_) recorder_->queued(sequence, op, tensor, tensors, root, reduceOp);
  std::optional<detail::CollectiveFingerprint> fingerprint;
  if (debug_ != DebugLevel::Off)
    fingerprint = detail::CollectiveFingerprint::of(sequence, op, tensor, tensors, root, reduceOp);
  // A call that fails before its Work exists (bad input, the DETAIL check) is recorded too.
  auto failedBeforeStart = [&](const std::string& error) {
    if (recorder_) recorder_->finished(sequence, error);
  };
  if (debug_ == DebugLevel::Detail) {
    // Every rank's fingerprint, gathered before the collective itself can pair wrong calls.
    std::vector<Tensor> all;
    // The check's own failure (a rank that never makes the call: a timeout) reaches the caller
    // as the collective's would, through its Work, named after the collective.
    auto failed = [&](const auto& error) {
      failedBeforeStart(error.what());
      std::string call = fingerprint->describe();
      auto work = std::make_shared<Work>(call, timeout, std::vector<Tensor>{});
      using ErrorType = std::decay_t<decltype(error)>;
      work->finishWithError(std::make_exception_ptr(ErrorType(
          detail::concat(call, " in group '", options_.groupName, "' on rank ", rank_,
                         ": the C10D_DEBUG=DETAIL check before it failed: ", error.what()),
          error.context())));
      work->setErrorContext(errorContext_, op, static_cast<int64_t>(sequence), -1);
      return work;
    };
    try {
      all = gatherFingerprints(sequence, fingerprint->encode(), timeout);
    } catch (const TimeoutError& e) {
      return failed(e);
    } catch (const Error& e) {
      return failed(BackendError(e.what()));
    }
    std::vector<detail::CollectiveFingerprint> byRank;
    for (const Tensor& words : all) byRank.push_back(detail::CollectiveFingerprint::decode(words));
    std::string mismatch = detail::describeMismatch(byRank);
    if (!mismatch.empty()) {
      failedBeforeStart("C10D_DEBUG=DETAIL: the ranks' collectives differ");
      C10D_THROW(InvalidArgument, "C10D_DEBUG=DETAIL: rank ", rank_, " of group '",
                 options_.groupName, "': the ranks' collectives differ: ", mismatch);
    }
  }
  // The clock is read only for the log line.
  std::chrono::steady_clock::time_point start;
  if (debug_ != DebugLevel::Off) start = std::chrono::steady_clock::now();
  std::shared_ptr<Work> work;
  try {
    work = issue();
  } catch (const std::exception& e) {
    failedBeforeStart(e.what());
    throw;
  }
  work->setErrorContext(errorContext_, op, static_cast<int64_t>(sequence), -1);
  if (recorder_) recorder_->started(sequence);
  // Built only when INFO logging wants it: with C10D_DEBUG off the callback copies no strings
  // (the std::function holding it is still allocated).
  std::string logPrefix = debug_ != DebugLevel::Off
                              ? detail::concat("group '", options_.groupName, "' rank ", rank_,
                                               ": ", fingerprint->describe())
                              : std::string();
  work->getFuture()->addCallback([start, sequence, recorder = recorder_,
                                  logPrefix = std::move(logPrefix)](Future& done) {
    std::string error;
    if (std::exception_ptr failure = done.error()) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        error = e.what();
      } catch (...) {
        error = "an exception that is not a std::exception";
      }
    }
    if (recorder) {
      recorder->finished(sequence, error);
      // Every rank that sees a collective fail leaves its view of the group behind.
      if (!error.empty()) {
        try {
          recorder->dump(detail::concat("collective #", sequence, " failed: ", error));
        } catch (const std::exception& e) {
          C10D_LOG(Warning, e.what());
        }
      }
    }
    if (!logPrefix.empty()) {
      auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
      logLine(LogLevel::Info, detail::concat(logPrefix, error.empty() ? " completed" : " failed",
                                             " in ", us / 1000.0, " ms"));
    }
  });
  return work;
}

std::string ProcessGroup::dumpFlightRecorder(const std::string& reason) const {
  C10D_CHECK(recorder_ != nullptr, InvalidArgument, "process group '", options_.groupName,
             "': the flight recorder is off (C10D_FLIGHT_RECORDER_SIZE=0)");
  return recorder_->dump(reason);
}

Backend& ProcessGroup::route(const Tensor& tensor, const char* op) const {
  checkUsable(op);
  checkTensor(tensor, op, "the");
  DeviceType device = tensor.device().type;
  auto it = routes_.find(device);
  if (it == routes_.end()) backend(device);  // throws, naming the spec
  return *it->second;
}

std::shared_ptr<Work> ProcessGroup::broadcast(const Tensor& tensor,
                                              const BroadcastOptions& options) {
  return withErrorContext("broadcast", -1, [&] {
    Backend& backend = route(tensor, "broadcast");
    checkRank(options.rootRank, "root", "broadcast");
    BroadcastOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "broadcast");
    return checked("broadcast", &tensor, 1, options.rootRank, std::nullopt, resolved.timeout,
                   [&] { return backend.broadcast(tensor, resolved); });
  });
}

std::shared_ptr<Work> ProcessGroup::allreduce(const Tensor& tensor,
                                              const AllreduceOptions& options) {
  return withErrorContext("allreduce", -1, [&] {
    Backend& backend = route(tensor, "allreduce");
    checkReduceOp(options.reduceOp, tensor.dtype(), "allreduce");
    AllreduceOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "allreduce");
    return checked("allreduce", &tensor, 1, -1, options.reduceOp, resolved.timeout,
                   [&] { return backend.allreduce(tensor, resolved); });
  });
}

std::shared_ptr<Work> ProcessGroup::allreduceCoalesced(const std::vector<Tensor>& tensors,
                                                       const AllreduceOptions& options) {
  return withErrorContext("allreduce_coalesced", -1, [&] {
    C10D_CHECK(!tensors.empty(), InvalidArgument, "allreduce_coalesced: no tensors");
    Backend& backend = route(tensors[0], "allreduce_coalesced");
    for (size_t i = 0; i < tensors.size(); ++i) {
      checkTensor(tensors[i], "allreduce_coalesced", "a");
      checkSameKind(tensors[0], tensors[i], "allreduce_coalesced", "tensor " + std::to_string(i));
    }
    checkReduceOp(options.reduceOp, tensors[0].dtype(), "allreduce_coalesced");
    AllreduceOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "allreduce_coalesced");
    return checked("allreduce_coalesced", &tensors[0], static_cast<int64_t>(tensors.size()), -1,
                   options.reduceOp, resolved.timeout,
                   [&] { return backend.allreduceCoalesced(tensors, resolved); });
  });
}

std::shared_ptr<Work> ProcessGroup::reduce(const Tensor& tensor, const ReduceOptions& options) {
  return withErrorContext("reduce", -1, [&] {
    Backend& backend = route(tensor, "reduce");
    checkRank(options.rootRank, "root", "reduce");
    checkReduceOp(options.reduceOp, tensor.dtype(), "reduce");
    ReduceOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "reduce");
    return checked("reduce", &tensor, 1, options.rootRank, options.reduceOp, resolved.timeout,
                   [&] { return backend.reduce(tensor, resolved); });
  });
}

std::shared_ptr<Work> ProcessGroup::allgather(const std::vector<Tensor>& outputs,
                                              const Tensor& input,
                                              const AllgatherOptions& options) {
  return withErrorContext("allgather", -1, [&] {
    Backend& backend = route(input, "allgather");
    checkList(outputs, size_, "allgather", "output");
    for (int r = 0; r < size_; ++r) {
      checkTensor(outputs[r], "allgather", "output");
      checkSameShape(input, outputs[r], "allgather", "output " + std::to_string(r));
    }
    AllgatherOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "allgather");
    return checked("allgather", &input, 1, -1, std::nullopt, resolved.timeout,
                   [&] { return backend.allgather(outputs, input, resolved); });
  });
}

std::shared_ptr<Work> ProcessGroup::allgatherIntoTensor(const Tensor& output, const Tensor& input,
                                                        const AllgatherOptions& options) {
  return withErrorContext("allgather_into_tensor", -1, [&] {
    Backend& backend = route(input, "allgather_into_tensor");
    checkTensor(output, "allgather_into_tensor", "output");
    checkSameKind(input, output, "allgather_into_tensor", "output");
    C10D_CHECK(output.numel() == input.numel() * size_, InvalidArgument,
               "allgather_into_tensor: output ", output.describe(), " must have size() * ",
               input.numel(), " = ", input.numel() * size_, " elements");
    AllgatherOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "allgather_into_tensor");
    return checked("allgather_into_tensor", &input, 1, -1, std::nullopt, resolved.timeout,
                   [&] { return backend.allgatherIntoTensor(output, input, resolved); });
  });
}

std::shared_ptr<Work> ProcessGroup::gather(const std::vector<Tensor>& outputs, const Tensor& input,
                                           const GatherOptions& options) {
  return withErrorContext("gather", -1, [&] {
    Backend& backend = route(input, "gather");
    checkRank(options.rootRank, "root", "gather");
    if (rank_ == options.rootRank) {
      checkList(outputs, size_, "gather", "output");
      for (int r = 0; r < size_; ++r) {
        checkTensor(outputs[r], "gather", "output");
        checkSameShape(input, outputs[r], "gather", "output " + std::to_string(r));
      }
    } else {
      C10D_CHECK(outputs.empty(), InvalidArgument, "gather: rank ", rank_, " is not the root (",
                 options.rootRank, ") and must pass no outputs");
    }
    GatherOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "gather");
    return checked("gather", &input, 1, options.rootRank, std::nullopt, resolved.timeout,
                   [&] { return backend.gather(outputs, input, resolved); });
  });
}

std::shared_ptr<Work> ProcessGroup::scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                            const ScatterOptions& options) {
  return withErrorContext("scatter", -1, [&] {
    Backend& backend = route(output, "scatter");
    checkRank(options.rootRank, "root", "scatter");
    if (rank_ == options.rootRank) {
      checkList(inputs, size_, "scatter", "input");
      for (int r = 0; r < size_; ++r) {
        checkTensor(inputs[r], "scatter", "input");
        checkSameShape(output, inputs[r], "scatter", "input " + std::to_string(r));
      }
    } else {
      C10D_CHECK(inputs.empty(), InvalidArgument, "scatter: rank ", rank_, " is not the root (",
                 options.rootRank, ") and must pass no inputs");
    }
    ScatterOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "scatter");
    return checked("scatter", &output, 1, options.rootRank, std::nullopt, resolved.timeout,
                   [&] { return backend.scatter(output, inputs, resolved); });
  });
}

std::shared_ptr<Work> ProcessGroup::reduceScatter(const Tensor& output,
                                                  const std::vector<Tensor>& inputs,
                                                  const ReduceScatterOptions& options) {
  return withErrorContext("reduce_scatter", -1, [&] {
    Backend& backend = route(output, "reduce_scatter");
    checkList(inputs, size_, "reduce_scatter", "input");
    for (int r = 0; r < size_; ++r) {
      checkTensor(inputs[r], "reduce_scatter", "input");
      checkSameShape(output, inputs[r], "reduce_scatter", "input " + std::to_string(r));
    }
    checkReduceOp(options.reduceOp, output.dtype(), "reduce_scatter");
    ReduceScatterOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "reduce_scatter");
    return checked("reduce_scatter", &output, 1, -1, options.reduceOp, resolved.timeout,
                   [&] { return backend.reduceScatter(output, inputs, resolved); });
  });
}

std::shared_ptr<Work> ProcessGroup::reduceScatterTensor(const Tensor& output, const Tensor& input,
                                                        const ReduceScatterOptions& options) {
  return withErrorContext("reduce_scatter_tensor", -1, [&] {
    Backend& backend = route(output, "reduce_scatter_tensor");
    checkTensor(input, "reduce_scatter_tensor", "input");
    checkSameKind(output, input, "reduce_scatter_tensor", "input");
    C10D_CHECK(input.numel() == output.numel() * size_, InvalidArgument,
               "reduce_scatter_tensor: input ", input.describe(), " must have size() * ",
               output.numel(), " = ", output.numel() * size_, " elements");
    checkReduceOp(options.reduceOp, output.dtype(), "reduce_scatter_tensor");
    ReduceScatterOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "reduce_scatter_tensor");
    return checked("reduce_scatter_tensor", &output, 1, -1, options.reduceOp, resolved.timeout,
                   [&] { return backend.reduceScatterTensor(output, input, resolved); });
  });
}

std::shared_ptr<Work> ProcessGroup::alltoall(const std::vector<Tensor>& outputs,
                                             const std::vector<Tensor>& inputs,
                                             const AllToAllOptions& options) {
  return withErrorContext("alltoall", -1, [&] {
    checkList(inputs, size_, "alltoall", "input");
    checkList(outputs, size_, "alltoall", "output");
    Backend& backend = route(inputs[0], "alltoall");
    for (int r = 0; r < size_; ++r) {
      checkTensor(inputs[r], "alltoall", "input");
      checkTensor(outputs[r], "alltoall", "output");
      checkSameKind(inputs[0], inputs[r], "alltoall", "input " + std::to_string(r));
      checkSameKind(inputs[0], outputs[r], "alltoall", "output " + std::to_string(r));
    }
    AllToAllOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "alltoall");
    return checked("alltoall", &inputs[0], static_cast<int64_t>(inputs.size()), -1, std::nullopt,
                   resolved.timeout, [&] { return backend.alltoall(outputs, inputs, resolved); });
  });
}

std::shared_ptr<Work> ProcessGroup::alltoallBase(const Tensor& output, const Tensor& input,
                                                 const std::vector<int64_t>& outputSplitSizes,
                                                 const std::vector<int64_t>& inputSplitSizes,
                                                 const AllToAllOptions& options) {
  return withErrorContext("alltoall_base", -1, [&] {
    Backend& backend = route(input, "alltoall_base");
    checkTensor(output, "alltoall_base", "output");
    checkSameKind(input, output, "alltoall_base", "output");
    auto rowsOf = [](const Tensor& tensor) { return tensor.dim() == 0 ? 1 : tensor.sizes()[0]; };
    auto checkSplits = [&](const std::vector<int64_t>& splits, const Tensor& tensor,
                           const char* role) {
      int64_t rows = rowsOf(tensor);
      if (splits.empty()) {
        C10D_CHECK(rows % size_ == 0, InvalidArgument, "alltoall_base: ", role, " ",
                   tensor.describe(), " has ", rows, " rows, not divisible by the group size ",
                   size_, "; pass split sizes");
        return;
      }
      C10D_CHECK(static_cast<int>(splits.size()) == size_, InvalidArgument,
                 "alltoall_base: ", splits.size(), " ", role, " split sizes for a group of ",
                 size_);
      int64_t total = 0;
      for (int64_t split : splits) {
        C10D_CHECK(split >= 0, InvalidArgument, "alltoall_base: negative ", role, " split ", split);
        total += split;
      }
      C10D_CHECK(total == rows, InvalidArgument, "alltoall_base: ", role, " splits sum to ", total,
                 " but ", role, " ", tensor.describe(), " has ", rows, " rows");
    };
    checkSplits(inputSplitSizes, input, "input");
    checkSplits(outputSplitSizes, output, "output");
    // What this rank sends itself must be what it expects from itself: no peer can make up for it.
    auto ownRows = [&](const std::vector<int64_t>& splits, const Tensor& tensor) {
      return splits.empty() ? rowsOf(tensor) / size_ : splits[rank_];
    };
    auto rowBytes = [&](const Tensor& tensor) {
      return rowsOf(tensor) == 0 ? int64_t{0}
                                 : static_cast<int64_t>(tensor.nbytes()) / rowsOf(tensor);
    };
    const int64_t sentToSelf = ownRows(inputSplitSizes, input);
    const int64_t expectedFromSelf = ownRows(outputSplitSizes, output);
    C10D_CHECK(
        sentToSelf == expectedFromSelf && (sentToSelf == 0 || rowBytes(input) == rowBytes(output)),
        InvalidArgument, "alltoall_base: rank ", rank_, " sends itself ", sentToSelf,
        " rows but expects ", expectedFromSelf, " from itself (input ", input.describe(),
        ", output ", output.describe(), "); its input split ", rank_, " and output split ", rank_,
        " must describe the same rows");
    AllToAllOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "alltoall_base");
    return checked("alltoall_base", &input, 1, -1, std::nullopt, resolved.timeout, [&] {
      return backend.alltoallBase(output, input, outputSplitSizes, inputSplitSizes, resolved);
    });
  });
}

std::shared_ptr<Work> ProcessGroup::barrier(const BarrierOptions& options) {
  return withErrorContext("barrier", -1, [&] {
    checkUsable("barrier");
    BarrierOptions resolved = options;
    resolved.timeout = resolve(options.timeout, "barrier");
    return checked("barrier", nullptr, 0, -1, std::nullopt, resolved.timeout,
                   [&] { return backend(DeviceType::CPU)->barrier(resolved); });
  });
}

void ProcessGroup::monitoredBarrier(const BarrierOptions& options, bool waitAllRanks) {
  return withErrorContext("monitored_barrier", -1, [&] {
    checkUsable("monitored_barrier");
    C10D_CHECK(options_.storeIsShared, InvalidArgument, "monitored_barrier in group '",
               options_.groupName,
               "' needs a store shared by the ranks; this job has none (start it with "
               "MASTER_ADDR and MASTER_PORT set)");
    auto timeout = resolve(options.timeout, "monitored_barrier");
    auto deadline = std::chrono::steady_clock::now() + timeout;
    // Through the store rather than the backend: the point is to name ranks that never arrive,
    // which a backend collective cannot do once it is stuck.
    std::string base = "monitored_barrier/" + options_.groupName + "/";
    int64_t round = store_->add(base + "round/" + std::to_string(rank_), 1);
    std::string prefix = base + std::to_string(round) + "/";
    store_->setString(prefix + "arrived/" + std::to_string(rank_), "1");
    if (rank_ != 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      store_->wait({prefix + "released"}, std::max(left, std::chrono::milliseconds(1)));
      std::string verdict = store_->getString(prefix + "released");
      C10D_CHECK(verdict == "ok", TimeoutError, "monitored_barrier in group '", options_.groupName,
                 "': ", verdict);
      return;
    }
    std::vector<int> missing;
    for (int r = 1; r < size_; ++r) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      try {
        store_->wait({prefix + "arrived/" + std::to_string(r)},
                     std::max(left, std::chrono::milliseconds(1)));
      } catch (const TimeoutError&) {
        missing.push_back(r);
        if (!waitAllRanks) break;
      }
    }
    if (missing.empty()) {
      store_->setString(prefix + "released", "ok");
      return;
    }
    std::string message = detail::concat("rank(s) ", rankList(missing), " did not arrive within ",
                                         timeout.count(), " ms");
    store_->setString(prefix + "released", message);
    throw TimeoutError(
        detail::concat("monitored_barrier in group '", options_.groupName, "': ", message),
        ErrorContext{.peers = missing});
  });
}

std::shared_ptr<Work> ProcessGroup::send(const Tensor& tensor, int dstRank, int tag,
                                         std::chrono::milliseconds timeout) {
  return withErrorContext("send", dstRank, [&] {
    Backend& backend = route(tensor, "send");
    checkRank(dstRank, "destination", "send");
    C10D_CHECK(tag >= 0, InvalidArgument, "send: tag must be >= 0, got ", tag);
    C10D_CHECK(dstRank != rank_, InvalidArgument, "send: rank ", rank_, " cannot send to itself");
    return withErrorContext(backend.send(tensor, dstRank, tag, resolve(timeout, "send")), "send",
                            dstRank);
  });
}

std::shared_ptr<Work> ProcessGroup::recv(const Tensor& tensor, int srcRank, int tag,
                                         std::chrono::milliseconds timeout) {
  return withErrorContext("recv", srcRank, [&] {
    Backend& backend = route(tensor, "recv");
    checkRank(srcRank, "source", "recv");
    C10D_CHECK(tag >= 0, InvalidArgument, "recv: tag must be >= 0, got ", tag);
    C10D_CHECK(srcRank != rank_, InvalidArgument, "recv: rank ", rank_,
               " cannot receive from itself");
    return withErrorContext(backend.recv(tensor, srcRank, tag, resolve(timeout, "recv")), "recv",
                            srcRank);
  });
}

std::shared_ptr<Work> ProcessGroup::recvAnysource(const Tensor& tensor, int tag,
                                                  std::chrono::milliseconds timeout) {
  return withErrorContext("recv_anysource", -1, [&] {
    Backend& backend = route(tensor, "recv_anysource");
    C10D_CHECK(tag >= 0, InvalidArgument, "recv_anysource: tag must be >= 0, got ", tag);
    C10D_CHECK(size_ > 1, InvalidArgument, "recv_anysource ", tensor.describe(), " tag ", tag,
               " (group '", options_.groupName, "'): a group of one has nobody to receive from");
    return withErrorContext(backend.recvAnysource(tensor, tag, resolve(timeout, "recv_anysource")),
                            "recv_anysource", -1);
  });
}

std::vector<std::shared_ptr<Work>> ProcessGroup::batchIsendIrecv(
    const std::vector<P2POp>& ops, std::chrono::milliseconds timeout) {
  return withErrorContext("batch_isend_irecv", -1, [&] {
    C10D_CHECK(!ops.empty(), InvalidArgument, "batch_isend_irecv: no operations");
    Backend& backend = route(ops[0].tensor, "batch_isend_irecv");
    for (const P2POp& op : ops) {
      checkTensor(op.tensor, "batch_isend_irecv", op.kind == P2POp::Send ? "send" : "recv");
      C10D_CHECK(op.tensor.device() == ops[0].tensor.device(), InvalidArgument,
                 "batch_isend_irecv: all tensors must be on one device");
      checkRank(op.peer, op.kind == P2POp::Send ? "destination" : "source", "batch_isend_irecv");
      C10D_CHECK(op.tag >= 0, InvalidArgument, "batch_isend_irecv: tag must be >= 0");
      C10D_CHECK(op.peer != rank_, InvalidArgument, "batch_isend_irecv: rank ", rank_,
                 op.kind == P2POp::Send ? " cannot send to itself" : " cannot receive from itself");
    }
    std::vector<std::shared_ptr<Work>> works =
        backend.batchIsendIrecv(ops, resolve(timeout, "batch_isend_irecv"));
    for (size_t i = 0; i < works.size() && i < ops.size(); ++i) {
      withErrorContext(works[i], ops[i].kind == P2POp::Send ? "send" : "recv", ops[i].peer);
    }
    return works;
  });
}

std::shared_ptr<ProcessGroup> ProcessGroup::newGroup(const std::vector<int>& ranks,
                                                     std::optional<ProcessGroupOptions> options) {
  return withErrorContext("new_group", -1, [&] {
    checkUsable("new_group");
    C10D_CHECK(!ranks.empty(), InvalidArgument, "new_group: empty rank list");
    std::vector<int> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    C10D_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), InvalidArgument,
               "new_group: duplicate rank in ", rankList(ranks));
    for (int r : ranks) checkRank(r, "rank", "new_group");
    const uint64_t index = subgroupCounter_++;
    agreeOnCreation(index, "new_group " + rankList(ranks));
    return makeSubgroup(ranks, options_.groupName + ".sub" + std::to_string(index), options);
  });
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key,
                                                  std::optional<ProcessGroupOptions> options) {
  return withErrorContext("split", -1, [&] {
    checkUsable("split");
    const uint64_t index = subgroupCounter_++;
    agreeOnCreation(index, "split");
    std::string name = options_.groupName + ".split" + std::to_string(index);
    std::vector<std::array<int, 2>> all = exchangeColors(name, color, key);
    std::vector<std::pair<int, int>> members;  // (key, rank) of this rank's color, if it has one
    for (int r = 0; r < size_ && color >= 0; ++r) {
      if (all[r][0] == color) members.emplace_back(all[r][1], r);
    }
    std::sort(members.begin(), members.end());
    std::vector<int> ranks;
    for (auto& [k, r] : members) ranks.push_back(r);
    return makeSubgroup(ranks, name + ".color" + std::to_string(color), options);
  });
}

std::vector<Store::Bytes> ProcessGroup::exchangeThroughStore(
    const std::string& prefix, const Store::Bytes& mine, std::chrono::milliseconds timeout,
    const std::function<std::string(const std::string& absent)>& describeAbsent) {
  store_->set(prefix + std::to_string(rank_), mine);
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(prefix + std::to_string(r));
  try {
    return store_->multiGet(keys, timeout);
  } catch (const TimeoutError&) {
    std::vector<int> absent;
    for (int r = 0; r < size_; ++r) {
      if (!store_->check({keys[r]})) absent.push_back(r);
    }
    C10D_THROW(TimeoutError, describeAbsent(rankList(absent)));
  }
}

std::vector<Tensor> ProcessGroup::gatherFingerprints(uint64_t sequence, const Tensor& mine,
                                                     std::chrono::milliseconds timeout) {
  const int64_t words = detail::CollectiveFingerprint::kWords;
  std::vector<Tensor> all;
  for (int r = 0; r < size_; ++r) all.push_back(Tensor::empty({words}, ScalarType::Int64));
  if (!options_.storeIsShared) {
    backend(DeviceType::CPU)->allgather(all, mine, {.timeout = timeout})->wait();
    return all;
  }
  auto prefix = [&](uint64_t seq) {
    return detail::concat("detail/", options_.groupName, "/", seq, "/");
  };
  const auto* bytes = static_cast<const uint8_t*>(mine.data());
  std::vector<Store::Bytes> values =
      exchangeThroughStore(prefix(sequence), Store::Bytes(bytes, bytes + mine.nbytes()), timeout,
                           [&](const std::string& absent) {
                             return detail::concat("rank(s) ", absent, " did not make collective #",
                                                   sequence + 1, " of group '", options_.groupName,
                                                   "' within ", timeout.count(), " ms");
                           });
  // Every rank has read the previous collective's records once all of this one's exist.
  if (sequence > 0) store_->deleteKey(prefix(sequence - 1) + std::to_string(rank_));
  for (int r = 0; r < size_; ++r) {
    C10D_CHECK(values[r].size() == static_cast<size_t>(all[r].nbytes()), BackendError,
               "C10D_DEBUG=DETAIL: rank ", r, "'s record of collective #", sequence + 1, " has ",
               values[r].size(), " bytes, not ", all[r].nbytes());
    std::memcpy(all[r].data(), values[r].data(), values[r].size());
  }
  return all;
}

void ProcessGroup::agreeOnCreation(uint64_t index, const std::string& call) {
  // Without a shared store the backend splits its communicator collectively (MPI_Comm_split),
  // which has no way to say who is missing; nothing to record here.
  if (!options_.storeIsShared) return;
  // The store is the job's: the key names the group too.
  auto where = [&] {
    return detail::concat(call, " in group '", options_.groupName, "' (group creation #", index + 1,
                          " on this rank)");
  };
  const char* rule =
      "every rank of a group must make the same new_group and split calls in the same order; a "
      "rank that skips one shifts every later one";
  std::vector<Store::Bytes> calls = exchangeThroughStore(
      detail::concat("create/", options_.groupName, "/", index, "/"), toBytes(call),
      options_.timeout, [&](const std::string& absent) {
        return detail::concat(where(), ": rank(s) ", absent, " made no group creation #", index + 1,
                              " within ", options_.timeout.count(), " ms; ", rule);
      });
  for (int r = 0; r < size_; ++r) {
    std::string theirs = toString(calls[r]);
    C10D_CHECK(theirs == call, InvalidArgument, where(), ": rank ", r, " made ", theirs,
               " as its group creation #", index + 1, "; ", rule);
  }
}

std::vector<std::array<int, 2>> ProcessGroup::exchangeColors(const std::string& name, int color,
                                                             int key) {
  std::vector<std::array<int, 2>> all(size_);
  if (options_.storeIsShared) {
    std::string prefix = "split/" + name + "/";
    store_->setString(prefix + std::to_string(rank_),
                      std::to_string(color) + " " + std::to_string(key));
    std::vector<std::string> keys;
    for (int r = 0; r < size_; ++r) keys.push_back(prefix + std::to_string(r));
    std::vector<Store::Bytes> values = store_->multiGet(keys, options_.timeout);
    for (int r = 0; r < size_; ++r) {
      std::istringstream in(toString(values[r]));
      in >> all[r][0] >> all[r][1];
    }
    return all;
  }
  // No shared store: through the backend, as one allgather of (color, key) per rank.
  auto cpu = backends_.find(DeviceType::CPU);
  C10D_CHECK(cpu != backends_.end(), InvalidArgument, "split in group '", options_.groupName,
             "': without a shared store (MASTER_ADDR) it needs a CPU backend");
  Tensor mine = Tensor::empty({2}, ScalarType::Int32);
  static_cast<int32_t*>(mine.data())[0] = color;
  static_cast<int32_t*>(mine.data())[1] = key;
  Tensor gathered = Tensor::empty({2 * static_cast<int64_t>(size_)}, ScalarType::Int32);
  cpu->second->allgatherIntoTensor(gathered, mine, {.timeout = options_.timeout})->wait();
  for (int r = 0; r < size_; ++r) {
    all[r][0] = static_cast<int32_t*>(gathered.data())[2 * r];
    all[r][1] = static_cast<int32_t*>(gathered.data())[2 * r + 1];
  }
  return all;
}

std::shared_ptr<ProcessGroup> ProcessGroup::makeSubgroup(
    const std::vector<int>& memberRanks, const std::string& name,
    std::optional<ProcessGroupOptions> options) {
  // Every rank of this group gets here for every subgroup, members or not: the backends that
  // split a communicator collectively need all of them.
  std::map<std::string, std::shared_ptr<void>> fromParent;
  for (auto& [device, backend] : backends_) {
    // One backend may serve several device types: split it once.
    if (fromParent.count(backend->name()) == 0) {
      fromParent[backend->name()] = backend->splitForSubgroup(memberRanks);
    }
  }
  auto it = std::find(memberRanks.begin(), memberRanks.end(), rank_);
  if (it == memberRanks.end()) {
    return std::shared_ptr<ProcessGroup>(new ProcessGroup(NonMember{}, name));
  }
  ProcessGroupOptions subOptions = options.value_or(options_);
  subOptions.groupName = name;
  subOptions.storeIsShared = options_.storeIsShared;
  std::shared_ptr<ProcessGroup> group(
      new ProcessGroup(store_, static_cast<int>(it - memberRanks.begin()),
                       static_cast<int>(memberRanks.size()), subOptions, fromParent));
  for (size_t i = 0; i < memberRanks.size(); ++i) {
    group->globalRanks_[i] = globalRanks_[memberRanks[i]];
  }
  return group;
}

}  // namespace c10d::inline v0
