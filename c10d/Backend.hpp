#pragma once

/// \file
/// Backend, the interface of a communication library behind a ProcessGroup, and the registry
/// that makes backends selectable by name.

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
  const Tensor* input = nullptr;                 ///< the op's one input; null when unused
  const Tensor* output = nullptr;                ///< the op's one output; null when unused
  const std::vector<Tensor>* inputs = nullptr;   ///< the op's input list; null when unused
  const std::vector<Tensor>* outputs = nullptr;  ///< the op's output list; null when unused
  /// alltoall_base: input rows (dim 0) sent to each rank; empty for equal splits.
  const std::vector<int64_t>* inputSplits = nullptr;
  /// alltoall_base: output rows (dim 0) received from each rank; empty for equal splits.
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
  /// \param name the backend's name, as registered ("gloo"); its errors name it.
  /// \param rank this process's rank in the group (BackendContext::rank).
  /// \param size the group's number of ranks (BackendContext::size).
  Backend(std::string name, int rank, int size)
      : name_(std::move(name)), rank_(rank), size_(size) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  /// \return The backend's name, as given to the constructor.
  const std::string& name() const { return name_; }
  /// \return This process's rank in the group.
  int rank() const { return rank_; }
  /// \return The group's number of ranks.
  int size() const { return size_; }

  /// Starts op on tensors and returns its Work. The default calls the per-op method for op.type.
  /// \param op the op, validated and numbered by ProcessGroup (its timeout resolved).
  /// \param tensors the op's tensors (see OpTensors); the pointers are valid during this call only.
  /// \return The op's Work, never null (ProcessGroup binds it to op).
  /// \throws BackendError from the default when the per-op method for op.type is not overridden.
  virtual std::shared_ptr<Work> start(const Op& op, const OpTensors& tensors);
  /// Starts point-to-point ops together (batchIsendIrecv): ops[i] describes p2p[i]; one Work per
  /// op, in order. The default calls the per-op batchIsendIrecv.
  /// \param ops the ops, numbered by ProcessGroup; they share one resolved timeout.
  /// \param p2p the sends and receives (tensors on one device, tags >= 0, peers not this rank).
  /// \return One Work per op, in order, none null; adjacent entries may be one Work (a backend
  ///     that fuses the batch).
  /// \throws BackendError from the default when batchIsendIrecv is not overridden.
  virtual std::vector<std::shared_ptr<Work>> startBatch(const std::vector<Op>& ops,
                                                        const std::vector<P2POp>& p2p);

  /// Whether this backend moves tensors of the device type itself. ProcessGroup serves CUDA
  /// tensors routed to a backend that handles only CPU ones by staging them through host memory
  /// (HostStagingBackend). The default: CPU only.
  /// \param type a device type.
  /// \return Whether this backend moves tensors of type itself.
  virtual bool handlesDevice(DeviceType type) const { return type == DeviceType::CPU; }

  /// Aborts pending operations (they fail) and releases the backend's resources. Called by
  /// ProcessGroup::shutdown; later calls fail.
  virtual void shutdown() {}
  /// As shutdown, without waiting for anything a lost peer may hold up (ProcessGroup::retire:
  /// c10d::elastic leaving a generation whose members died). The default is shutdown(), for
  /// backends whose shutdown waits for nothing.
  /// \param reason why (ProcessGroup::retire's reason); a backend may name it in the errors of the
  ///     ops it fails. The default ignores it.
  virtual void abort(const std::string& reason) {
    (void)reason;
    shutdown();
  }

  /// Called on every rank of this group, in the same order on all of them, when newGroup/split
  /// makes a subgroup of ranksInParent (this group's ranks, in the subgroup's rank order); this
  /// rank is a member when it appears there. What it returns reaches the member's new backend of
  /// the same name as BackendContext::fromParent. Backends whose library splits a communicator
  /// collectively (MPI_Comm_split, ncclCommSplit) do it here; the default returns null.
  /// \param ranksInParent the subgroup's members, as this group's ranks, in subgroup rank order.
  /// \return What the member's new backend gets as BackendContext::fromParent (null for
  ///     nothing); a non-member's result is dropped.
  virtual std::shared_ptr<void> splitForSubgroup(const std::vector<int>& ranksInParent);

 protected:
  /// \name Per-op methods
  /// The per-op methods of a backend a program writes (see start()). Each starts its op and
  /// returns the op's Work, never null (e.g. a BackendWork the backend completes); the default
  /// throws BackendError "backend <name> does not support <op>". Options carry the op's resolved
  /// timeout and the fields start() fills from the Op; ranks are group ranks.
  ///@{

  /// Broadcasts the root's tensor to every rank.
  /// \param tensor the data on the root; on the other ranks, the buffer it lands in.
  /// \param options rootRank and timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> broadcast(const Tensor& tensor, const BroadcastOptions& options);
  /// Reduces tensor across the ranks, in place on every rank.
  /// \param tensor each rank's contribution, and the result.
  /// \param options reduceOp and timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> allreduce(const Tensor& tensor, const AllreduceOptions& options);
  /// Allreduce of each tensor of a list, as one op.
  /// \param tensors each rank's contributions, and the results (in place).
  /// \param options reduceOp and timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> allreduceCoalesced(const std::vector<Tensor>& tensors,
                                                   const AllreduceOptions& options);
  /// Reduces tensor across the ranks into the root's tensor.
  /// \param tensor each rank's contribution; on the root, the result (in place).
  /// \param options reduceOp, rootRank and timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> reduce(const Tensor& tensor, const ReduceOptions& options);
  /// Gathers every rank's input into every rank's outputs.
  /// \param outputs size() tensors shaped like input; outputs[r] receives rank r's input.
  /// \param input this rank's contribution.
  /// \param options timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> allgather(const std::vector<Tensor>& outputs, const Tensor& input,
                                          const AllgatherOptions& options);
  /// Allgather into one flat tensor.
  /// \param output size() * input.numel() elements; rank r's input lands at r * input.numel().
  /// \param input this rank's contribution.
  /// \param options timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> allgatherIntoTensor(const Tensor& output, const Tensor& input,
                                                    const AllgatherOptions& options);
  /// Gathers every rank's input on the root.
  /// \param outputs on the root, size() tensors shaped like input (outputs[r]: rank r's input);
  ///     empty on the other ranks.
  /// \param input this rank's contribution.
  /// \param options rootRank and timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> gather(const std::vector<Tensor>& outputs, const Tensor& input,
                                       const GatherOptions& options);
  /// Scatters the root's inputs, one tensor to each rank.
  /// \param output the buffer this rank's part lands in.
  /// \param inputs on the root, size() tensors shaped like output (inputs[r] goes to rank r);
  ///     empty on the other ranks.
  /// \param options rootRank and timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                        const ScatterOptions& options);
  /// Reduces the ranks' lists and scatters the result: rank r gets the reduction of inputs[r].
  /// \param output this rank's part of the result.
  /// \param inputs size() tensors shaped like output.
  /// \param options reduceOp and timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> reduceScatter(const Tensor& output,
                                              const std::vector<Tensor>& inputs,
                                              const ReduceScatterOptions& options);
  /// reduceScatter of one flat tensor: rank r gets the reduction of every rank's r-th part.
  /// \param output this rank's part of the result.
  /// \param input size() * output.numel() elements.
  /// \param options reduceOp and timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> reduceScatterTensor(const Tensor& output, const Tensor& input,
                                                    const ReduceScatterOptions& options);
  /// Exchanges one tensor with every rank.
  /// \param outputs size() tensors; outputs[r] receives rank r's inputs[rank()].
  /// \param inputs size() tensors; inputs[r] goes to rank r.
  /// \param options timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> alltoall(const std::vector<Tensor>& outputs,
                                         const std::vector<Tensor>& inputs,
                                         const AllToAllOptions& options);
  /// Flat all-to-all along dim 0 (AlltoAllV when split).
  /// Splits are element counts along dim 0 per rank; empty means equal splits.
  /// \param output the rows received, rank after rank.
  /// \param input the rows sent, rank after rank.
  /// \param outputSplitSizes size() row counts received from each rank, or empty.
  /// \param inputSplitSizes size() row counts sent to each rank, or empty.
  /// \param options timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> alltoallBase(const Tensor& output, const Tensor& input,
                                             const std::vector<int64_t>& outputSplitSizes,
                                             const std::vector<int64_t>& inputSplitSizes,
                                             const AllToAllOptions& options);
  /// Completes once every rank has entered the barrier.
  /// \param options timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> barrier(const BarrierOptions& options);
  /// Sends tensor to dstRank.
  /// \param tensor the data.
  /// \param dstRank the receiving rank (not this one).
  /// \param tag matches the receive's tag (>= 0).
  /// \param timeout the op's resolved timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> send(const Tensor& tensor, int dstRank, int tag,
                                     std::chrono::milliseconds timeout);
  /// Receives from srcRank into tensor.
  /// \param tensor the buffer (the send's size in bytes).
  /// \param srcRank the sending rank (not this one).
  /// \param tag matches the send's tag (>= 0).
  /// \param timeout the op's resolved timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> recv(const Tensor& tensor, int srcRank, int tag,
                                     std::chrono::milliseconds timeout);
  /// Receives from whichever rank sends with tag first; the Work reports that rank
  /// (BackendWork::setSourceRank before it completes).
  /// \param tensor the buffer.
  /// \param tag matches the send's tag (>= 0).
  /// \param timeout the op's resolved timeout.
  /// \return The op's Work, never null (e.g. a BackendWork the backend completes).
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::shared_ptr<Work> recvAnysource(const Tensor& tensor, int tag,
                                              std::chrono::milliseconds timeout);
  /// Starts all ops together; one Work per op, in order.
  /// \param ops the sends and receives (tensors on one device, tags >= 0, peers not this rank).
  /// \param timeout the batch's resolved timeout, shared by its ops.
  /// \return One Work per op, in order, none null.
  /// \throws BackendError unless overridden (the default, via unsupported()).
  virtual std::vector<std::shared_ptr<Work>> batchIsendIrecv(const std::vector<P2POp>& ops,
                                                             std::chrono::milliseconds timeout);
  ///@}

  /// Throws BackendError "backend <name> does not support <op>": the per-op methods' default.
  /// \param op the op's name ("broadcast").
  /// \throws BackendError always.
  [[noreturn]] void unsupported(const char* op) const;
  /// batchIsendIrecv for a backend whose send and recv never block when posted: starting each op
  /// in turn starts them together.
  /// \param ops the sends and receives; each goes to send() or recv().
  /// \param timeout each op's timeout.
  /// \return One Work per op, in order.
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
  std::shared_ptr<Store> store;       ///< private to this group and backend
  int rank;                           ///< this process's rank in the group
  int size;                           ///< the group's number of ranks
  std::chrono::milliseconds timeout;  ///< the group's default timeout (positive)
  std::string groupName;              ///< the group's name (ProcessGroupOptions::groupName)
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

/// Makes a group's backend: called once per group (and subgroup) that selects the name, on each
/// of its ranks, as the ProcessGroup is created. It must return a backend (not null); what it
/// throws reaches the ProcessGroup constructor's caller.
using BackendFactory = std::function<std::shared_ptr<Backend>(const BackendContext&)>;

/// Makes a backend selectable by name (C10D_BACKEND=name, ProcessGroupOptions::backend). The
/// built-in backends of this build ("gloo", and "mpi"/"nccl" where built) are always registered.
/// Throws InvalidArgument when name is taken. Thread-safe.
/// \param name the backend's name (not empty).
/// \param factory makes the backend for each group that selects name (not null).
/// \throws InvalidArgument when name is empty or taken, or factory is null.
void registerBackend(const std::string& name, BackendFactory factory);
/// \param name a backend's name.
/// \return Whether a backend of that name is registered (a built-in one counts). Thread-safe.
bool isBackendRegistered(const std::string& name);
/// \return The registered backends' names, in name order. Thread-safe.
std::vector<std::string> registeredBackends();
/// Checks that a backend of that name is registered.
/// Throws InvalidArgument naming the unknown backend and the registered ones.
/// \param name a backend's name.
/// \throws InvalidArgument when no backend of that name is registered.
void requireBackend(const std::string& name);
/// Makes a backend with the factory registered as name (loading its library first for "mpi" and
/// "nccl", which are libraries of their own: c10d/BackendLibrary.hpp).
/// Throws InvalidArgument naming the unknown backend and the registered ones.
/// \param name a registered backend's name.
/// \param context what the factory gets.
/// \return The factory's backend; what the factory throws passes through.
/// \throws InvalidArgument when no backend of that name is registered.
/// \throws BackendError when the backend's library cannot be loaded.
std::shared_ptr<Backend> createBackend(const std::string& name, const BackendContext& context);

}  // namespace c10d::inline v1
