#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "c10d/Op.hpp"
#include "c10d/Options.hpp"
#include "c10d/Work.hpp"
#include "c10d/core/Settings.hpp"

namespace c10d::inline v1 {

class Store;

namespace detail {
class GroupTrace;
}

/// The tensors of one op, as ProcessGroup validated them; which fields an op type uses:
///   input                 broadcast, allreduce, reduce, send, recv, recv_anysource (in place),
///                         allgather, allgather_into_tensor, gather, reduce_scatter_tensor,
///                         alltoall_base (their input)
///   output                allgather_into_tensor, scatter, reduce_scatter, reduce_scatter_tensor,
///                         alltoall_base
///   inputs                allreduce_coalesced (in place), scatter (on the root), reduce_scatter,
///                         alltoall
///   outputs               allgather, gather (on the root), alltoall
///   inputSplits, outputSplits   alltoall_base (empty: equal splits)
/// The pointers are valid for the call of Backend::start only.
struct OpTensors {
  const Tensor* input = nullptr;
  const Tensor* output = nullptr;
  const std::vector<Tensor>* inputs = nullptr;
  const std::vector<Tensor>* outputs = nullptr;
  const std::vector<int64_t>* inputSplits = nullptr;
  const std::vector<int64_t>* outputSplits = nullptr;
};

/// A communication library behind a ProcessGroup: Gloo, MPI, NCCL, or one a program registers.
/// Every operation starts asynchronously and returns a Work; output tensors are written in place.
///
/// ProcessGroup reaches a backend through start(): one call per op, with the op described once
/// (c10d/Op.hpp: its type, dtype, sizes, root, reduce op, peer, tag and the group's sequence
/// number) and its tensors. The library's own backends implement start() itself. A backend a
/// program writes may instead override the per-op methods below, which start() calls by default;
/// an op it does not override throws BackendError "backend <name> does not support <op>".
///
/// Arguments are validated by ProcessGroup before they reach a backend (ranks in range,
/// contiguous tensors, matching sizes and dtypes, reduce op defined on the dtype), so a backend
/// may rely on them. Ranks are group ranks; timeouts are resolved (never kDefaultTimeout).
///
/// Threading: a backend is called from the threads that use its ProcessGroup. Collectives must be
/// issued in the same order on every rank of the group, as with every collective library.
class Backend {
 public:
  Backend(std::string name, int rank, int size)
      : name_(std::move(name)), rank_(rank), size_(size) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  const std::string& name() const { return name_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  /// Starts op on tensors and returns its Work. The default calls the per-op method for op.type.
  virtual std::shared_ptr<Work> start(const Op& op, const OpTensors& tensors);
  /// Starts point-to-point ops together (batchIsendIrecv): ops[i] describes p2p[i]; one Work per
  /// op, in order. The default calls the per-op batchIsendIrecv.
  virtual std::vector<std::shared_ptr<Work>> startBatch(const std::vector<Op>& ops,
                                                        const std::vector<P2POp>& p2p);

  /// Whether this backend moves tensors of the device type itself. ProcessGroup serves CUDA
  /// tensors routed to a backend that handles only CPU ones by staging them through host memory
  /// (HostStagingBackend). The default: CPU only.
  virtual bool handlesDevice(DeviceType type) const { return type == DeviceType::CPU; }

  /// Aborts pending operations (they fail) and releases the backend's resources. Called by
  /// ProcessGroup::shutdown; later calls fail.
  virtual void shutdown() {}
  /// As shutdown, without waiting for anything a lost peer may hold up (ProcessGroup::retire:
  /// c10d::elastic leaving a generation whose members died). The default is shutdown(), for
  /// backends whose shutdown waits for nothing.
  virtual void abort(const std::string& reason) {
    (void)reason;
    shutdown();
  }

  /// Called on every rank of this group, in the same order on all of them, when newGroup/split
  /// makes a subgroup of ranksInParent (this group's ranks, in the subgroup's rank order); this
  /// rank is a member when it appears there. What it returns reaches the member's new backend of
  /// the same name as BackendContext::fromParent. Backends whose library splits a communicator
  /// collectively (MPI_Comm_split, ncclCommSplit) do it here; the default returns null.
  virtual std::shared_ptr<void> splitForSubgroup(const std::vector<int>& ranksInParent);

 protected:
  /// The per-op methods of a backend a program writes (see start()).
  virtual std::shared_ptr<Work> broadcast(const Tensor& tensor, const BroadcastOptions& options);
  virtual std::shared_ptr<Work> allreduce(const Tensor& tensor, const AllreduceOptions& options);
  virtual std::shared_ptr<Work> allreduceCoalesced(const std::vector<Tensor>& tensors,
                                                   const AllreduceOptions& options);
  virtual std::shared_ptr<Work> reduce(const Tensor& tensor, const ReduceOptions& options);
  virtual std::shared_ptr<Work> allgather(const std::vector<Tensor>& outputs, const Tensor& input,
                                          const AllgatherOptions& options);
  virtual std::shared_ptr<Work> allgatherIntoTensor(const Tensor& output, const Tensor& input,
                                                    const AllgatherOptions& options);
  virtual std::shared_ptr<Work> gather(const std::vector<Tensor>& outputs, const Tensor& input,
                                       const GatherOptions& options);
  virtual std::shared_ptr<Work> scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                        const ScatterOptions& options);
  virtual std::shared_ptr<Work> reduceScatter(const Tensor& output,
                                              const std::vector<Tensor>& inputs,
                                              const ReduceScatterOptions& options);
  virtual std::shared_ptr<Work> reduceScatterTensor(const Tensor& output, const Tensor& input,
                                                    const ReduceScatterOptions& options);
  virtual std::shared_ptr<Work> alltoall(const std::vector<Tensor>& outputs,
                                         const std::vector<Tensor>& inputs,
                                         const AllToAllOptions& options);
  /// Splits are element counts along dim 0 per rank; empty means equal splits.
  virtual std::shared_ptr<Work> alltoallBase(const Tensor& output, const Tensor& input,
                                             const std::vector<int64_t>& outputSplitSizes,
                                             const std::vector<int64_t>& inputSplitSizes,
                                             const AllToAllOptions& options);
  virtual std::shared_ptr<Work> barrier(const BarrierOptions& options);
  virtual std::shared_ptr<Work> send(const Tensor& tensor, int dstRank, int tag,
                                     std::chrono::milliseconds timeout);
  virtual std::shared_ptr<Work> recv(const Tensor& tensor, int srcRank, int tag,
                                     std::chrono::milliseconds timeout);
  virtual std::shared_ptr<Work> recvAnysource(const Tensor& tensor, int tag,
                                              std::chrono::milliseconds timeout);
  /// Starts all ops together; one Work per op, in order.
  virtual std::vector<std::shared_ptr<Work>> batchIsendIrecv(const std::vector<P2POp>& ops,
                                                             std::chrono::milliseconds timeout);

  [[noreturn]] void unsupported(const char* op) const;
  /// batchIsendIrecv for a backend whose send and recv never block when posted: starting each op
  /// in turn starts them together.
  std::vector<std::shared_ptr<Work>> postEachInTurn(const std::vector<P2POp>& ops,
                                                    std::chrono::milliseconds timeout);

 private:
  std::string name_;
  int rank_;
  int size_;
};

/// What a backend factory gets: its group's store namespace, rank, size, default timeout and
/// settings.
struct BackendContext {
  std::shared_ptr<Store> store;  ///< private to this group and backend
  int rank;
  int size;
  std::chrono::milliseconds timeout;
  std::string groupName;
  /// For a subgroup's backend: what the parent group's backend of the same name returned from
  /// splitForSubgroup; null for a job's first group.
  std::shared_ptr<void> fromParent;
  /// The group's configuration (c10d/core/Settings.hpp): ProcessGroupOptions::config over the
  /// environment. Backends read their knobs here, never with getenv.
  config::Settings settings = {};
  /// This process's rank among those on its host (ProcessGroupOptions::localRank, else LOCAL_RANK
  /// or the launcher's equivalent); -1 when nobody said.
  int localRank = -1;
  /// The group's identity, flight recorder and C10D_DEBUG logging, which this library's backends
  /// hand to their Works (opaque to a program's backends, whose Works ProcessGroup binds itself).
  std::shared_ptr<detail::GroupTrace> trace = nullptr;
};

using BackendFactory = std::function<std::shared_ptr<Backend>(const BackendContext&)>;

/// Makes a backend selectable by name (C10D_BACKEND=name, ProcessGroupOptions::backend). The
/// built-in backends of this build ("gloo", and "mpi"/"nccl" where built) are always registered.
/// Throws InvalidArgument when name is taken. Thread-safe.
void registerBackend(const std::string& name, BackendFactory factory);
bool isBackendRegistered(const std::string& name);
std::vector<std::string> registeredBackends();
/// Throws InvalidArgument naming the unknown backend and the registered ones.
void requireBackend(const std::string& name);
/// Throws InvalidArgument naming the unknown backend and the registered ones.
std::shared_ptr<Backend> createBackend(const std::string& name, const BackendContext& context);

}  // namespace c10d::inline v1
