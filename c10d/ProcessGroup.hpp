#pragma once

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

namespace c10d::inline v1 {

class Store;
class FlightRecorder;
namespace detail {
struct GroupState;
}

/// Which backend serves which device type: "gloo" (every device), or "cpu:gloo,cuda:nccl".
/// Throws InvalidArgument on an unknown device type or a malformed spec.
std::map<DeviceType, std::string> parseBackendSpec(const std::string& spec);

/// How many times this rank ran an operation of a group, and the bytes of those calls, counted as
/// nccl-tests counts an op's size: the buffer (allreduce, broadcast, reduce, send, recv), the
/// whole gathered or scattered buffer (all N parts: allgather, reduce_scatter, gather, scatter), or
/// this rank's input (alltoall). Bytes moved on the wire follow from the algorithm (a ring
/// allreduce sends 2(N-1)/N of its size); docs/parallelism.md compares the two.
struct OpTraffic {
  std::string op;  ///< "allreduce", "send", ...
  uint64_t calls = 0;
  uint64_t bytes = 0;
};

struct ProcessGroupOptions {
  std::string backend = "gloo";  ///< a backend spec, see parseBackendSpec
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
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
/// Threading: operations may be issued from any thread; each backend defines how concurrent
/// operations are ordered (Gloo: in issue order).
class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  /// Creates the backends named by options.backend over store (namespaced per group inside).
  /// rank and size are this process's place in the group. Throws InvalidArgument on a bad rank,
  /// size, spec or backend name; the backends' errors (e.g. TimeoutError while peers connect).
  ProcessGroup(std::shared_ptr<Store> store, int rank, int size, ProcessGroupOptions options = {});
  /// As above, handing each backend (by name) what reaches it as BackendContext::fromParent: a
  /// subgroup's split, or a communicator a program hands in (newMpiProcessGroup).
  ProcessGroup(std::shared_ptr<Store> store, int rank, int size, ProcessGroupOptions options,
               const std::map<std::string, std::shared_ptr<void>>& fromParent);
  ~ProcessGroup();

  int rank() const;
  int size() const;
  const std::string& groupName() const;
  /// The backend spec the group was created with ("gloo", "cpu:gloo,cuda:nccl"); "" for a
  /// non-member's handle.
  const std::string& backendSpec() const;
  std::chrono::milliseconds timeout() const;
  /// False for the handle a non-member receives from newGroup/split: every operation on it
  /// throws InvalidArgument saying so.
  bool isMember() const;
  /// ProcessGroupOptions::localRank, else the launcher's; -1 when unknown.
  int localRank() const;

  /// Global rank (in the root group) of a rank of this group, and the inverse (nullopt when the
  /// global rank is not in this group).
  int globalRank(int groupRank) const;
  std::optional<int> groupRank(int globalRank) const;
  const std::vector<int>& globalRanks() const;

  std::shared_ptr<Backend> backend(DeviceType device) const;

  /// The group's flight recorder (c10d/FlightRecorder.hpp), null when C10D_FLIGHT_RECORDER_SIZE
  /// is 0. dumpFlightRecorder writes its file now and returns the path; it throws
  /// InvalidArgument when the recorder is off and Error when the file cannot be written.
  const FlightRecorder* flightRecorder() const;
  std::string dumpFlightRecorder(const std::string& reason = "on request") const;
  /// Each operation this rank issued on this group (counted once the backend took it), in name
  /// order; resetTraffic() starts the counts again (e.g. after warm-up steps).
  std::vector<OpTraffic> traffic() const;
  void resetTraffic();
  std::shared_ptr<Store> store() const;

  std::shared_ptr<Work> broadcast(const Tensor& tensor, const BroadcastOptions& options = {});
  std::shared_ptr<Work> allreduce(const Tensor& tensor, const AllreduceOptions& options = {});
  std::shared_ptr<Work> allreduceCoalesced(const std::vector<Tensor>& tensors,
                                           const AllreduceOptions& options = {});
  std::shared_ptr<Work> reduce(const Tensor& tensor, const ReduceOptions& options = {});
  /// outputs: size() tensors shaped like input.
  std::shared_ptr<Work> allgather(const std::vector<Tensor>& outputs, const Tensor& input,
                                  const AllgatherOptions& options = {});
  /// output: size() * input.numel() elements, rank r's input at offset r * input.numel().
  std::shared_ptr<Work> allgatherIntoTensor(const Tensor& output, const Tensor& input,
                                            const AllgatherOptions& options = {});
  /// outputs: size() tensors on the root, empty on the others.
  std::shared_ptr<Work> gather(const std::vector<Tensor>& outputs, const Tensor& input,
                               const GatherOptions& options = {});
  /// inputs: size() tensors on the root, empty on the others.
  std::shared_ptr<Work> scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                const ScatterOptions& options = {});
  /// inputs: size() tensors shaped like output; output = reduction of every rank's inputs[rank].
  std::shared_ptr<Work> reduceScatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                      const ReduceScatterOptions& options = {});
  /// input: size() * output.numel() elements.
  std::shared_ptr<Work> reduceScatterTensor(const Tensor& output, const Tensor& input,
                                            const ReduceScatterOptions& options = {});
  /// outputs[r] receives rank r's inputs[rank()].
  std::shared_ptr<Work> alltoall(const std::vector<Tensor>& outputs,
                                 const std::vector<Tensor>& inputs,
                                 const AllToAllOptions& options = {});
  /// Flat all-to-all along dim 0. Empty split lists mean equal splits (dim 0 divisible by size());
  /// otherwise size() counts of dim-0 rows each (AlltoAllV).
  std::shared_ptr<Work> alltoallBase(const Tensor& output, const Tensor& input,
                                     const std::vector<int64_t>& outputSplitSizes = {},
                                     const std::vector<int64_t>& inputSplitSizes = {},
                                     const AllToAllOptions& options = {});
  std::shared_ptr<Work> barrier(const BarrierOptions& options = {});
  /// A barrier through the job's store that names the ranks that did not arrive in time (rank 0
  /// collects); with waitAllRanks it reports all of them, otherwise the first. Blocking, as
  /// torch's monitored_barrier: it returns once every rank arrived, with a Work that is complete
  /// (its op() is a default barrier: it takes none of the group's numbers), and throws
  /// TimeoutError naming the missing ranks otherwise.
  std::shared_ptr<Work> monitoredBarrier(const BarrierOptions& options = {},
                                         bool waitAllRanks = false);

  /// Point-to-point: a send meets the receive of the same pair and tag posted in the same order,
  /// and the two must have the same size in bytes. On Gloo, sizes that differ fail both Works
  /// with InvalidArgument naming both sizes, the ranks and the tag; a smaller message is then at
  /// the start of the receive's tensor (the rest untouched), a larger one is dropped, and the
  /// group stays usable. A send's Work completes once its receive has taken the message.
  std::shared_ptr<Work> send(const Tensor& tensor, int dstRank, const SendOptions& options = {});
  std::shared_ptr<Work> recv(const Tensor& tensor, int srcRank, const RecvOptions& options = {});
  /// Receives from whichever rank sends with this tag first; Work::sourceRank() tells which.
  std::shared_ptr<Work> recvAnysource(const Tensor& tensor, const RecvOptions& options = {});
  std::vector<std::shared_ptr<Work>> batchIsendIrecv(const std::vector<P2POp>& ops,
                                                     const BatchP2POptions& options = {});
  /// Shorthands with the tag (and timeout) as arguments, as torch.distributed's send(tensor, dst,
  /// tag=...): the same as the calls above.
  std::shared_ptr<Work> send(const Tensor& tensor, int dstRank, int tag,
                             std::chrono::milliseconds timeout = kDefaultTimeout) {
    return send(tensor, dstRank, SendOptions{tag, timeout});
  }
  std::shared_ptr<Work> recv(const Tensor& tensor, int srcRank, int tag,
                             std::chrono::milliseconds timeout = kDefaultTimeout) {
    return recv(tensor, srcRank, RecvOptions{tag, timeout});
  }
  std::shared_ptr<Work> recvAnysource(const Tensor& tensor, int tag,
                                      std::chrono::milliseconds timeout = kDefaultTimeout) {
    return recvAnysource(tensor, RecvOptions{tag, timeout});
  }
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
  std::shared_ptr<Work> endCoalescing();
  /// Whether this thread has a coalescing block of this group open.
  bool isCoalescing() const;

  /// A group of the given ranks of this group (in that order). Every rank of this group must
  /// call it, in the same order relative to other newGroup/split calls. Members get a working
  /// group; non-members get a handle with isMember() false.
  std::shared_ptr<ProcessGroup> newGroup(const std::vector<int>& ranks,
                                         std::optional<ProcessGroupOptions> options = {});
  /// Groups ranks by color (ordered by key, then rank), like MPI_Comm_split. A negative color
  /// leaves this rank out (non-member handle). Collective over this group.
  std::shared_ptr<ProcessGroup> split(int color, int key = 0,
                                      std::optional<ProcessGroupOptions> options = {});

  /// Shuts the backends down; later operations throw StateError. Idempotent.
  void shutdown();
  /// Shuts this group and every group made from it (newGroup, split, theirs in turn) down; their
  /// later operations throw StateError with reason ("re-formed into generation 2: ..."), so that
  /// a program holding one learns why. c10d::elastic retires a generation this way.
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
