#pragma once

/// \file
/// ProcessGroup, the group of ranks that runs collectives and point-to-point operations, with
/// its options (ProcessGroupOptions), its traffic counts (OpTraffic) and parseBackendSpec.

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "c10d/Backend.hpp"
#include "c10d/Op.hpp"
#include "c10d/Options.hpp"
#include "c10d/Work.hpp"

/// The library's public API: process groups, stores, collectives and what is built on them. The
/// inline namespace v1 is the ABI version; the reference shows its names as c10d.
namespace c10d::inline v1 {

class Store;
class FlightRecorder;
namespace detail {
struct GroupState;
}

/// Which backend serves which device type: "gloo" (every device), or "cpu:gloo,cuda:nccl".
/// Throws InvalidArgument on an unknown device type or a malformed spec.
/// \param spec a backend name for both CPU and CUDA, or "device:backend" items separated by
///        commas (devices cpu and cuda, each at most once); spaces around names are ignored.
/// \return The backend name of each device type the spec names.
std::map<DeviceType, std::string> parseBackendSpec(const std::string& spec);

/// How many times this rank ran an operation of a group, and the bytes of those calls, counted as
/// nccl-tests counts an op's size: the buffer (allreduce, broadcast, reduce, send, recv), the
/// whole gathered or scattered buffer (all N parts: allgather, reduce_scatter, gather, scatter), or
/// this rank's input (alltoall). Bytes moved on the wire follow from the algorithm (a ring
/// allreduce sends 2(N-1)/N of its size); docs/parallelism.md compares the two.
struct OpTraffic {
  std::string op;  ///< "allreduce", "send", ...
  uint64_t calls = 0;  ///< operations of this type issued (since creation or resetTraffic())
  uint64_t bytes = 0;  ///< their bytes, summed, counted as above
};

/// How a ProcessGroup is made: its backends, default timeout, name and settings. A subgroup made
/// without options of its own (newGroup, split) takes its parent's.
struct ProcessGroupOptions {
  std::string backend = "gloo";  ///< a backend spec, see parseBackendSpec
  /// The timeout of the group's operations that are given kDefaultTimeout; must be positive.
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  /// The group's name: its backends' keys in the store are prefixed with it, and errors and
  /// flight-recorder dumps name it. A subgroup's name is made from its parent's, whatever this
  /// says.
  std::string groupName = "default";
  /// False when the store is private to this process (an MPI job started without MASTER_ADDR):
  /// split then exchanges colors through the group's CPU backend, and monitoredBarrier, which
  /// needs a store the ranks share, is unavailable.
  bool storeIsShared = true;
  /// Variables of c10d/core/Config.hpp for this group (and, unless they get options of their own,
  /// its subgroups), over the environment: e.g. {{"C10D_GLOO_FAST_PATH", "all"}}. Only variables of
  /// Scope::Group; an unknown name, a process-wide one or a bad value is an InvalidArgument at
  /// creation. An empty value means the default, whatever the environment says.
  std::map<std::string, std::string> config;
  /// This process's rank among those on its host (NCCL's default device, the Gloo spin decision);
  /// -1: LOCAL_RANK, else Open MPI's, PMI's or Slurm's local rank, else unknown.
  int localRank = -1;
};

/// A group of ranks that run collectives and point-to-point operations together, like
/// torch.distributed's ProcessGroup. Each operation is routed to the backend registered for the
/// device of its tensors, validated first (so bad input is an InvalidArgument on the caller,
/// never a hang on the wire), and returns a Work that completes, fails, or times out.
///
/// Operations write their outputs in place. Collectives must be called in the same order on
/// every rank of the group. Ranks in arguments are ranks within this group; globalRank() and
/// groupRank() translate.
///
/// Every operation throws InvalidArgument for a bad argument (a rank out of range, an undefined
/// or non-contiguous tensor, a tensor on a device the group has no backend for, a reduce op the
/// dtype does not support, a timeout that is neither kDefaultTimeout nor positive) and on a
/// non-member's handle, and StateError once the group is shut down. An operation's options'
/// timeout of kDefaultTimeout means the group's timeout().
///
/// Threading: operations may be issued from any thread; each backend defines how concurrent
/// operations are ordered (Gloo: in issue order).
class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  /// Creates the backends named by options.backend over store (namespaced per group inside).
  /// rank and size are this process's place in the group. Throws InvalidArgument on a bad rank,
  /// size, spec or backend name; the backends' errors (e.g. TimeoutError while peers connect).
  /// \param store the store the ranks meet through (not null); see
  ///        ProcessGroupOptions::storeIsShared.
  /// \param rank this process's rank in the group, in [0, size).
  /// \param size the number of ranks in the group, at least 1.
  /// \param options the group's backends, timeout (positive), name and settings.
  ProcessGroup(std::shared_ptr<Store> store, int rank, int size, ProcessGroupOptions options = {});
  /// As above, handing each backend (by name) what reaches it as BackendContext::fromParent: a
  /// subgroup's split, or a communicator a program hands in (newMpiProcessGroup).
  /// \param store the store the ranks meet through (not null).
  /// \param rank this process's rank in the group, in [0, size).
  /// \param size the number of ranks in the group, at least 1.
  /// \param options the group's backends, timeout (positive), name and settings.
  /// \param fromParent by backend name, the value that backend gets; a backend not named gets null.
  ProcessGroup(std::shared_ptr<Store> store, int rank, int size, ProcessGroupOptions options,
               const std::map<std::string, std::shared_ptr<void>>& fromParent);
  /// Shuts the group down (shutdown()).
  ~ProcessGroup();

  /// \return This process's rank in the group, in [0, size()); -1 for a non-member's handle.
  int rank() const;
  /// \return The number of ranks in the group; 0 for a non-member's handle.
  int size() const;
  /// \return The group's name (ProcessGroupOptions::groupName; a subgroup's is made from its
  ///         parent's, e.g. "default.sub0").
  const std::string& groupName() const;
  /// The backend spec the group was created with ("gloo", "cpu:gloo,cuda:nccl"); "" for a
  /// non-member's handle.
  /// \return That spec.
  const std::string& backendSpec() const;
  /// \return The timeout of the group's operations given kDefaultTimeout.
  std::chrono::milliseconds timeout() const;
  /// False for the handle a non-member receives from newGroup/split: every operation on it
  /// throws InvalidArgument saying so.
  /// \return Whether this process is a member of the group.
  bool isMember() const;
  /// ProcessGroupOptions::localRank, else the launcher's; -1 when unknown.
  /// \return This process's rank among the ranks on its host.
  int localRank() const;

  /// Global rank (in the root group) of a rank of this group, and the inverse (nullopt when the
  /// global rank is not in this group).
  /// \param groupRank a rank of this group, in [0, size()).
  /// \return Its rank in the root group.
  /// \throws InvalidArgument when groupRank is out of range.
  int globalRank(int groupRank) const;
  /// The inverse of globalRank().
  /// \param globalRank a rank of the root group.
  /// \return Its rank in this group; nullopt when it is not in this group.
  std::optional<int> groupRank(int globalRank) const;
  /// \return The global rank of each rank of this group, by group rank (empty for a non-member's
  ///         handle).
  const std::vector<int>& globalRanks() const;

  /// The backend the spec names for a device type. A CUDA op on a backend that moves only CPU
  /// tensors goes through host memory, but this returns the backend itself.
  /// \param device the device type.
  /// \return That backend, shared by the device types it serves.
  /// \throws InvalidArgument when the group has no backend for device.
  std::shared_ptr<Backend> backend(DeviceType device) const;

  /// The group's flight recorder (c10d/FlightRecorder.hpp), null when C10D_FLIGHT_RECORDER_SIZE
  /// is 0. dumpFlightRecorder writes its file now and returns the path; it throws
  /// InvalidArgument when the recorder is off and Error when the file cannot be written.
  /// \return The recorder, owned by the group; null when it is off.
  const FlightRecorder* flightRecorder() const;
  /// Writes the flight recorder's file now (FlightRecorder::dump).
  /// \param reason why, recorded in the dump.
  /// \return The path of the file written.
  /// \throws InvalidArgument when the recorder is off.
  /// \throws Error when the file cannot be written.
  std::string dumpFlightRecorder(const std::string& reason = "on request") const;
  /// Each operation this rank issued on this group (counted once the backend took it), in name
  /// order; resetTraffic() starts the counts again (e.g. after warm-up steps).
  /// \return One entry per operation type issued at least once.
  std::vector<OpTraffic> traffic() const;
  /// Sets every count of traffic() back to zero.
  void resetTraffic();
  /// \return The store the group was created over (a subgroup's: its parent's); null for a
  ///         non-member's handle.
  std::shared_ptr<Store> store() const;

  /// Copies the root's tensor into tensor on every other rank.
  /// \param tensor the root's input and the other ranks' output.
  /// \param options the root (BroadcastOptions::rootRank) and the timeout.
  /// \return The operation's Work.
  std::shared_ptr<Work> broadcast(const Tensor& tensor, const BroadcastOptions& options = {});
  /// Reduces tensor over the ranks, leaving the result in tensor on every rank.
  /// \param tensor this rank's input and output.
  /// \param options the reduce op (one the dtype supports) and the timeout.
  /// \return The operation's Work.
  std::shared_ptr<Work> allreduce(const Tensor& tensor, const AllreduceOptions& options = {});
  /// Allreduce of several tensors as one operation.
  /// \param tensors this rank's inputs and outputs: at least one, all of one dtype and device.
  /// \param options the reduce op (one the dtype supports) and the timeout.
  /// \return One Work for all the tensors.
  std::shared_ptr<Work> allreduceCoalesced(const std::vector<Tensor>& tensors,
                                           const AllreduceOptions& options = {});
  /// Reduces tensor over the ranks into the root's tensor.
  /// \param tensor this rank's input; on the root, also the output.
  /// \param options the root, the reduce op (one the dtype supports) and the timeout.
  /// \return The operation's Work.
  std::shared_ptr<Work> reduce(const Tensor& tensor, const ReduceOptions& options = {});
  /// Gathers every rank's input into outputs on every rank: outputs[r] receives rank r's input.
  /// \param outputs size() tensors shaped like input.
  /// \param input this rank's tensor.
  /// \param options the timeout.
  /// \return The operation's Work.
  std::shared_ptr<Work> allgather(const std::vector<Tensor>& outputs, const Tensor& input,
                                  const AllgatherOptions& options = {});
  /// Allgather into one tensor.
  /// \param output size() * input.numel() elements, rank r's input at offset r * input.numel(),
  ///        of input's dtype and device.
  /// \param input this rank's tensor.
  /// \param options the timeout.
  /// \return The operation's Work.
  std::shared_ptr<Work> allgatherIntoTensor(const Tensor& output, const Tensor& input,
                                            const AllgatherOptions& options = {});
  /// Gathers every rank's input on the root: outputs[r] receives rank r's input.
  /// \param outputs size() tensors on the root, empty on the others.
  /// \param input this rank's tensor; the root's outputs are shaped like it.
  /// \param options the root and the timeout.
  /// \return The operation's Work.
  std::shared_ptr<Work> gather(const std::vector<Tensor>& outputs, const Tensor& input,
                               const GatherOptions& options = {});
  /// Sends the root's inputs[r] to rank r's output.
  /// \param output this rank's part.
  /// \param inputs size() tensors on the root, empty on the others.
  /// \param options the root and the timeout.
  /// \return The operation's Work.
  std::shared_ptr<Work> scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                const ScatterOptions& options = {});
  /// Reduces and scatters: rank r's output is the reduction of every rank's inputs[r].
  /// \param output this rank's part of the result.
  /// \param inputs size() tensors shaped like output; output = reduction of every rank's
  ///        inputs[rank].
  /// \param options the reduce op (one the dtype supports) and the timeout.
  /// \return The operation's Work.
  std::shared_ptr<Work> reduceScatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                      const ReduceScatterOptions& options = {});
  /// Reduce-scatter of one tensor: rank r's output is the reduction of every rank's r-th part of
  /// input.
  /// \param output this rank's part of the result.
  /// \param input size() * output.numel() elements, of output's dtype and device.
  /// \param options the reduce op (one the dtype supports) and the timeout.
  /// \return The operation's Work.
  std::shared_ptr<Work> reduceScatterTensor(const Tensor& output, const Tensor& input,
                                            const ReduceScatterOptions& options = {});
  /// All-to-all of tensor lists: outputs[r] receives rank r's inputs[rank()].
  /// \param outputs size() tensors, of the inputs' dtype and device.
  /// \param inputs size() tensors of one dtype and device: inputs[r] goes to rank r.
  /// \param options the timeout.
  /// \return The operation's Work.
  std::shared_ptr<Work> alltoall(const std::vector<Tensor>& outputs,
                                 const std::vector<Tensor>& inputs,
                                 const AllToAllOptions& options = {});
  /// Flat all-to-all along dim 0. Empty split lists mean equal splits (dim 0 divisible by size());
  /// otherwise size() counts of dim-0 rows each (AlltoAllV).
  /// \param output receives, split by outputSplitSizes, each rank's rows for this rank in rank
  ///        order; of input's dtype and device.
  /// \param input this rank's rows, split by inputSplitSizes: split r goes to rank r.
  /// \param outputSplitSizes rows of output from each rank (non-negative, summing to output's
  ///        rows); empty: equal splits.
  /// \param inputSplitSizes rows of input for each rank (non-negative, summing to input's rows);
  ///        empty: equal splits.
  /// \param options the timeout.
  /// \return The operation's Work.
  /// \throws InvalidArgument also when the rows this rank sends itself differ from those it
  ///         expects from itself.
  std::shared_ptr<Work> alltoallBase(const Tensor& output, const Tensor& input,
                                     const std::vector<int64_t>& outputSplitSizes = {},
                                     const std::vector<int64_t>& inputSplitSizes = {},
                                     const AllToAllOptions& options = {});
  /// Synchronizes the ranks: the Work completes once every rank has called barrier. It runs on
  /// the group's CPU backend.
  /// \param options the timeout.
  /// \return The operation's Work.
  /// \throws InvalidArgument when the group has no backend for CPU tensors.
  std::shared_ptr<Work> barrier(const BarrierOptions& options = {});
  /// A barrier through the job's store that names the ranks that did not arrive in time (rank 0
  /// collects); with waitAllRanks it reports all of them, otherwise the first. Blocking, as
  /// torch's monitored_barrier: it returns once every rank arrived, with a Work that is complete
  /// (its op() is a default barrier: it takes none of the group's numbers), and throws
  /// TimeoutError naming the missing ranks otherwise.
  /// \param options the timeout, counted from the call.
  /// \param waitAllRanks whether rank 0 waits out every rank, to name all that are missing.
  /// \return A completed Work.
  /// \throws InvalidArgument when the store is not shared (ProcessGroupOptions::storeIsShared).
  std::shared_ptr<Work> monitoredBarrier(const BarrierOptions& options = {},
                                         bool waitAllRanks = false);

  /// Point-to-point: a send meets the receive of the same pair and tag posted in the same order,
  /// and the two must have the same size in bytes. On Gloo, sizes that differ fail both Works
  /// with InvalidArgument naming both sizes, the ranks and the tag; a smaller message is then at
  /// the start of the receive's tensor (the rest untouched), a larger one is dropped, and the
  /// group stays usable. A send's Work completes once its receive has taken the message.
  /// \param tensor the data to send.
  /// \param dstRank the receiving rank, not this one.
  /// \param options the tag (>= 0) and the timeout.
  /// \return The send's Work.
  std::shared_ptr<Work> send(const Tensor& tensor, int dstRank, const SendOptions& options = {});
  /// Receives into tensor the message srcRank sends with the same tag (see send).
  /// \param tensor the output.
  /// \param srcRank the sending rank, not this one.
  /// \param options the tag (>= 0) and the timeout.
  /// \return The receive's Work.
  std::shared_ptr<Work> recv(const Tensor& tensor, int srcRank, const RecvOptions& options = {});
  /// Receives from whichever rank sends with this tag first; Work::sourceRank() tells which.
  /// \param tensor the output.
  /// \param options the tag (>= 0) and the timeout.
  /// \return The receive's Work.
  /// \throws InvalidArgument in a group of one rank.
  std::shared_ptr<Work> recvAnysource(const Tensor& tensor, const RecvOptions& options = {});
  /// Issues sends and receives as one batch (torch's batch_isend_irecv).
  /// \param ops at least one; their tensors on one device, tags >= 0, peers other than this rank.
  /// \param options the timeout of the whole batch.
  /// \return A Work per op, in the order of ops; a backend that fuses the batch returns one Work
  ///         for several.
  std::vector<std::shared_ptr<Work>> batchIsendIrecv(const std::vector<P2POp>& ops,
                                                     const BatchP2POptions& options = {});
  /// Shorthands with the tag (and timeout) as arguments, as torch.distributed's send(tensor, dst,
  /// tag=...): the same as the calls above.
  /// \param tensor the data to send.
  /// \param dstRank the receiving rank, not this one.
  /// \param tag the tag, >= 0.
  /// \param timeout the timeout; kDefaultTimeout: the group's.
  /// \return The send's Work.
  std::shared_ptr<Work> send(const Tensor& tensor, int dstRank, int tag,
                             std::chrono::milliseconds timeout = kDefaultTimeout) {
    return send(tensor, dstRank, SendOptions{tag, timeout});
  }
  /// recv with the tag and timeout as arguments.
  /// \param tensor the output.
  /// \param srcRank the sending rank, not this one.
  /// \param tag the tag, >= 0.
  /// \param timeout the timeout; kDefaultTimeout: the group's.
  /// \return The receive's Work.
  std::shared_ptr<Work> recv(const Tensor& tensor, int srcRank, int tag,
                             std::chrono::milliseconds timeout = kDefaultTimeout) {
    return recv(tensor, srcRank, RecvOptions{tag, timeout});
  }
  /// recvAnysource with the tag and timeout as arguments.
  /// \param tensor the output.
  /// \param tag the tag, >= 0.
  /// \param timeout the timeout; kDefaultTimeout: the group's.
  /// \return The receive's Work.
  std::shared_ptr<Work> recvAnysource(const Tensor& tensor, int tag,
                                      std::chrono::milliseconds timeout = kDefaultTimeout) {
    return recvAnysource(tensor, RecvOptions{tag, timeout});
  }
  /// batchIsendIrecv with the timeout as an argument.
  /// \param ops at least one; their tensors on one device, tags >= 0, peers other than this rank.
  /// \param timeout the timeout of the whole batch; kDefaultTimeout: the group's.
  /// \return A Work per op, in the order of ops.
  std::vector<std::shared_ptr<Work>> batchIsendIrecv(const std::vector<P2POp>& ops,
                                                     std::chrono::milliseconds timeout) {
    return batchIsendIrecv(ops, BatchP2POptions{timeout});
  }

  /// Coalescing, as torch's _coalescing_manager: between startCoalescing() and endCoalescing(),
  /// the allreduces this thread issues on this group are validated and held, each returning a
  /// Work that completes with the fused op; endCoalescing() issues them as one allreduceCoalesced
  /// (one message per step instead of one per tensor) and returns its Work. Every rank must make
  /// the same calls. The block belongs to the thread that began it: other threads' ops on the
  /// group run as usual meanwhile. Throws InvalidArgument, the block going on without the refused
  /// op, for: an op other than allreduce, an allreduce whose dtype, device or reduce op differs
  /// from the block's first, an op on another group inside the block, a second start or an end
  /// without a start on this thread. A Work of a held op that is waited on before
  /// endCoalescing() throws StateError (the op has not started).
  void startCoalescing();
  /// Ends this thread's coalescing block of this group and issues its allreduces as one
  /// allreduceCoalesced (see startCoalescing()).
  /// \return That operation's Work; for a block that held nothing, a Work already complete.
  /// \throws InvalidArgument when this thread has no block of this group open.
  std::shared_ptr<Work> endCoalescing();
  /// Whether this thread has a coalescing block of this group open.
  /// \return True while it has.
  bool isCoalescing() const;

  /// A group of the given ranks of this group (in that order). Every rank of this group must
  /// call it, in the same order relative to other newGroup/split calls. Members get a working
  /// group; non-members get a handle with isMember() false.
  /// \param ranks distinct ranks of this group, at least one; the new group's rank i is ranks[i].
  /// \param options the new group's options; none: this group's. Its name and storeIsShared come
  ///        from this group whatever they say.
  /// \return The new group, or the non-member's handle.
  /// \throws InvalidArgument for an empty list, a repeated rank or one out of range, or (with a
  ///         shared store) naming a rank whose group creation at this point is another.
  /// \throws TimeoutError (with a shared store) naming the ranks that made no group creation
  ///         within the group's timeout.
  std::shared_ptr<ProcessGroup> newGroup(const std::vector<int>& ranks,
                                         std::optional<ProcessGroupOptions> options = {});
  /// Groups ranks by color (ordered by key, then rank), like MPI_Comm_split. A negative color
  /// leaves this rank out (non-member handle). Collective over this group.
  /// \param color the group this rank joins: the ranks with the same color; negative: none.
  /// \param key this rank's place among the ranks of its color (lower first).
  /// \param options the new group's options, as for newGroup.
  /// \return This rank's new group, or the non-member's handle.
  std::shared_ptr<ProcessGroup> split(int color, int key = 0,
                                      std::optional<ProcessGroupOptions> options = {});

  /// Shuts the backends down; later operations throw StateError. Idempotent.
  void shutdown();
  /// Shuts this group and every group made from it (newGroup, split, theirs in turn) down; their
  /// later operations throw StateError with reason ("re-formed into generation 2: ..."), so that
  /// a program holding one learns why. c10d::elastic retires a generation this way.
  /// \param reason why, carried by the later StateErrors and handed to each backend's abort.
  void retire(const std::string& reason);

 private:
  struct NonMember {};
  ProcessGroup(NonMember, std::string groupName);
  /// (color, key) of every rank of this group, for split.
  std::vector<std::array<int, 2>> exchangeColors(const std::string& name, int color, int key);
  /// Makes every rank of this group agree that its index-th group creation is call ("new_group
  /// [0, 1]", "split"): a rank that skipped or added one would shift every later subgroup's name
  /// and meet the wrong peers. Throws InvalidArgument naming a rank that made another call, and
  /// TimeoutError naming the ranks that made none.
  void agreeOnCreation(uint64_t index, const std::string& call);
  /// Sets prefix<rank> to mine in the job's store and returns every rank's value, in rank order.
  /// Throws TimeoutError with describeAbsent(the ranks that set none, listed) after timeout.
  std::vector<std::vector<uint8_t>> exchangeThroughStore(
      const std::string& prefix, const std::vector<uint8_t>& mine,
      std::chrono::milliseconds timeout,
      const std::function<std::string(const std::string& absent)>& describeAbsent);
  /// C10D_DEBUG=DETAIL: every rank's call (detail::encodeCall) of collective op, through the job's
  /// store (so any backend works, a program's own included), or without a shared store through
  /// the CPU backend's allgather. Throws TimeoutError naming the ranks that did not make it.
  std::vector<Tensor> gatherCalls(const Op& op);

  /// The op's timeout: the group's for kDefaultTimeout; anything not positive is refused, naming op
  /// (inline in c10d/GroupState.hpp, for every op).
  std::chrono::milliseconds resolve(std::chrono::milliseconds timeout, const char* op) const;
  std::chrono::milliseconds resolveGiven(std::chrono::milliseconds timeout, const char* op) const;
  /// The one way an op reaches a backend, once its public method validated the call and filled op
  /// (all but its number): numbers it (the group's sequence for collectives, this rank's
  /// point-to-point count otherwise), records it, at C10D_DEBUG=DETAIL checks that every rank
  /// makes the same call, starts it on backend and counts bytes of traffic for it.
  std::shared_ptr<Work> issue(Backend& backend, Op& op, const OpTensors& tensors, uint64_t bytes);
  /// issue's branch inside a coalescing block of this thread (c10d/ProcessGroupCoalescing.cpp).
  std::shared_ptr<Work> hold(const Op& op, const OpTensors& tensors);
  /// The DETAIL check of collective op, before it starts: InvalidArgument when the ranks' calls
  /// differ; a failed Work for op when the check itself failed (a rank that never made it).
  std::shared_ptr<Work> checkEveryRankMakes(const Op& op);
  /// Runs body, the whole of public operation op: an Error it throws (bad input, a shut-down
  /// group, a backend's refusal) leaves with op, this group, this rank and peer (-1: none) in its
  /// context().
  template <typename Body>
  auto withErrorContext(const char* op, int peer, Body&& body) -> decltype(body());
  /// The backend for tensor's device (a cached pointer), after checkUsable(op).
  Backend& route(const Tensor& tensor, const char* op) const;
  void checkUsable(const char* op) const;
  void checkRank(int rank, const char* what, const char* op) const;
  /// shutdown's work: each backend shut down, or with abortBecause, aborted (Backend::abort).
  void stopBackends(const std::string* abortBecause);
  std::shared_ptr<ProcessGroup> makeSubgroup(const std::vector<int>& memberRanks,
                                             const std::string& name,
                                             std::optional<ProcessGroupOptions> options);

  /// Every field (c10d/GroupState.hpp, private): one pointer, so the class's size and layout
  /// do not change when a field is added.
  std::unique_ptr<detail::GroupState> state_;
  void countTraffic(OpType type, uint64_t bytes);
};

}  // namespace c10d::inline v1
