#pragma once

/// \file
/// FusionQueue: Horovod-style negotiated tensor fusion of named allreduces, allgathers and
/// broadcasts submitted in any order on each rank; its options and statistics.
///
/// Horovod-style negotiated tensor fusion, for frameworks whose ranks produce tensors in different
/// orders (dynamic graphs, several models): named tensors are submitted for allreduce, allgather or
/// broadcast in any order on each rank; a background thread agrees with the other ranks, once per
/// cycle, which names every rank has submitted, fuses the ready allreduces into buffers and runs
/// them in the agreed order.
///
/// \code
/// c10d::FusionQueue queue(*pg);                         // collective: every rank constructs it
/// auto a = queue.allreduce("layer3.grad", grad3);       // any order on each rank
/// auto b = queue.allreduce("layer1.grad", grad1);
/// a->wait(); b->wait();                                 // the averages, in place
/// \endcode
///
/// Negotiation: the first time a name is seen, every rank's request for it (op, dtype, shape,
/// device, reduce op, root) is exchanged and compared: a difference fails that name's Futures on
/// every rank with an InvalidArgument naming the tensor, the ranks and the difference. Agreed names
/// get a bit in a cache held identically by every rank; from then on a cycle costs one small
/// bitwise-AND allreduce of which cached names are ready here. A name some ranks submitted and
/// others did not is named in a warning after stallWarning (with the ranks missing), and its
/// Futures fail with TimeoutError naming them after the group's timeout.
///
/// The queue runs on a group of its own (newGroup over every rank of group, made by the
/// constructor), so it never interleaves with the caller's collectives on group.
///
/// Errors: InvalidArgument at submission (an empty name, a name already pending on this rank, a
/// dtype the op cannot take); StateError after shutdown; the collectives' errors through the
/// Futures. Threading: submissions from any thread; Futures complete on the queue's thread
/// (c10d-fusion), so callbacks must not block it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "c10d/ProcessGroup.hpp"
#include "c10d/Work.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

/// How a FusionQueue negotiates and fuses.
struct FusionOptions {
  /// How often the ranks agree on what is ready. Shorter reacts sooner and costs more cycles.
  std::chrono::microseconds cycleTime{1000};
  /// Ready allreduces of one dtype, device and reduce op are fused into buffers up to this size.
  size_t fusionThresholdBytes = size_t{64} << 20;
  /// A name submitted on some ranks but not all for this long is named in a warning.
  std::chrono::milliseconds stallWarning{std::chrono::seconds(60)};
  /// When set, a Chrome trace (chrome://tracing, Perfetto) of every tensor's phases is written
  /// here at shutdown: negotiate (submitted to agreed), copy in, collective, copy out.
  std::string timelinePath;
};

/// What a FusionQueue has done so far (FusionQueue::stats()).
struct FusionStats {
  uint64_t cycles = 0;       ///< negotiation cycles completed
  uint64_t exchanges = 0;    ///< cycles that exchanged new requests (the slow path)
  uint64_t collectives = 0;  ///< allreduces (fused), allgathers and broadcasts run
  uint64_t tensors = 0;      ///< requests completed
  double negotiationUs = 0;  ///< total time spent agreeing, all cycles
};

/// Named collectives submitted in any order on each rank, negotiated once per cycle by a
/// background thread and fused. Submissions may come from any thread; Futures complete on the
/// queue's thread (c10d-fusion), so their callbacks must not block it.
class FusionQueue {
 public:
  /// Collective over group (it makes the queue's own group). group must outlive the queue.
  /// Starts the queue's thread.
  /// \param group The ranks that exchange tensors; every one of them constructs a queue.
  /// \param options Cycle time, fusion threshold, stall warning and timeline.
  /// \throws InvalidArgument for a cycle time or fusion threshold that is not positive, or a
  /// group this rank is not a member of.
  explicit FusionQueue(ProcessGroup& group, FusionOptions options = {});
  /// Shuts down (see shutdown()).
  ~FusionQueue();
  FusionQueue(const FusionQueue&) = delete;
  FusionQueue& operator=(const FusionQueue&) = delete;

  /// tensor becomes the reduction of every rank's tensor of this name (in place).
  /// \param name The name every rank submits it under; not empty, not pending on this rank.
  /// \param tensor Defined and contiguous.
  /// \param op The reduction; every rank must submit the name with the same op.
  /// \return A Future that completes with {tensor} once reduced, or fails with the
  /// negotiation's or the collective's error.
  /// \throws InvalidArgument for an empty or pending name, an undefined or non-contiguous tensor,
  /// or an op its dtype does not support; StateError after shutdown.
  std::shared_ptr<Future> allreduce(const std::string& name, const Tensor& tensor,
                                    ReduceOp op = ReduceOp::AVG);
  /// output (size() * input.numel() elements) becomes every rank's input, in rank order.
  /// \param name The name every rank submits it under; not empty, not pending on this rank.
  /// \param input This rank's part; defined and contiguous.
  /// \param output Contiguous, of input's dtype and device, with group size * input.numel()
  /// elements.
  /// \return A Future that completes with {output} once gathered, or fails with the
  /// negotiation's or the collective's error.
  /// \throws InvalidArgument for an empty or pending name, or an input or output that does not
  /// fit; StateError after shutdown.
  std::shared_ptr<Future> allgather(const std::string& name, const Tensor& input,
                                    const Tensor& output);
  /// tensor becomes root's tensor of this name.
  /// \param name The name every rank submits it under; not empty, not pending on this rank.
  /// \param tensor Defined and contiguous.
  /// \param root The rank whose tensor every rank takes, in [0, group size).
  /// \return A Future that completes with {tensor} once broadcast, or fails with the
  /// negotiation's or the collective's error.
  /// \throws InvalidArgument for an empty or pending name, an undefined or non-contiguous tensor,
  /// or a root out of range; StateError after shutdown.
  std::shared_ptr<Future> broadcast(const std::string& name, const Tensor& tensor, int root = 0);

  /// Stops the queue on every rank: the ranks agree to stop at the next cycle (one rank's
  /// shutdown stops them all); Futures still pending fail with StateError. Idempotent; writes the
  /// timeline if asked for.
  void shutdown();

  /// \return A snapshot of the queue's counters so far. Any thread.
  FusionStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace c10d::inline v1
