#pragma once

/// \file
/// Join: training with uneven inputs, the ranks that run out of data shadowing the others'
/// collectives until every rank has (PyTorch's Join context manager).
///
/// Training with uneven inputs: ranks that run out of batches early keep answering the others'
/// collectives with neutral contributions until every rank has run out, instead of leaving the
/// others blocked in allreduce (what PyTorch's Join context manager does for DDP).
///
/// \code
/// c10d::Join join(*pg);
/// for (const Batch& batch : myBatches) {
///   int active = join.step();                  // before the step's collectives
///   ... compute grads; pg->allreduce(grads) ...; divide by active ...
/// }
/// int last = join.finish([&] {                 // once per step the others still run
///   grads.zero(); pg->allreduce(grads)->wait();  // the same collectives, neutral values
/// });
/// \endcode
///
/// Each step() and each round of finish() is one allreduce of worldSize int64 flags (rank r's
/// entry is 1 while r still has data), so every rank learns how many ranks are still active and
/// the joined ranks learn when to shadow a step and when everyone is done.
///
/// Errors: whatever the group's allreduce throws (a timeout names the op and ranks), and
/// InvalidArgument for step() after finish(). Threading: one Join per group, used by one thread,
/// with the group's other collectives issued in the same order on every rank.

#include <functional>

#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1 {

/// Counts the ranks that still have data, step by step, with one small allreduce per step, so
/// that ranks out of data can shadow the others' collectives. One Join per group, used by one
/// thread, with the group's other collectives issued in the same order on every rank.
class Join {
 public:
  /// group must outlive the Join. Not collective.
  /// \param group The group whose ranks join; its allreduce must take CPU tensors (the flags are
  /// a CPU int64 tensor).
  explicit Join(ProcessGroup& group);

  /// This rank has data for one more step. Returns how many ranks (this one included) run this
  /// step, e.g. to average a gradient summed over the active ranks only.
  /// \return The number of ranks running this step, in [1, group size].
  /// \throws InvalidArgument after finish(); the group's errors from the allreduce.
  int step();

  /// This rank is out of data: runs shadowStep once for each step the other ranks still run,
  /// then returns the last rank to join (the highest rank among those that ran the final step;
  /// -1 if no rank ran any step). Every rank returns the same value.
  /// \param shadowStep Issues one step's collectives with neutral values; may be empty (nothing
  /// runs between the flag exchanges). Exceptions it throws propagate.
  /// \return The last rank to join, or -1.
  /// \throws InvalidArgument when called twice; the group's errors from the allreduce.
  int finish(const std::function<void()>& shadowStep);

  /// Ranks active in the latest step() or shadowed step.
  /// \return That count; 0 before the first step() and once finish() has returned.
  int activeRanks() const { return active_; }

 private:
  /// One flag exchange; returns how many ranks are active and remembers the highest of them.
  int exchange(bool activeHere);

  ProcessGroup& group_;
  Tensor flags_;  ///< int64[size]: 1 for each rank with data this step
  int active_ = 0;
  int lastActiveRank_ = -1;
  bool finished_ = false;
};

}  // namespace c10d::inline v1
