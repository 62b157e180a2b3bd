#pragma once

/// \file
/// ZeroOptimizer: ZeRO stages 1 and 2, the optimizer's state (and gradients) sharded over ranks.

#include <memory>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/checkpoint/State.hpp"
#include "c10d/training/DistributedDataParallel.hpp"
#include "c10d/training/Optimizers.hpp"

namespace c10d::inline v1 {

/// How a ZeroOptimizer shards and buckets.
struct ZeroOptions {
  /// 1: the optimizer's state is sharded (gradients still allreduced); 2: the gradient buckets
  /// are reduce-scattered instead, each rank getting the average of its shard only.
  int stage = 2;
  size_t firstBucketBytes = size_t{1} << 20;  ///< as DataParallelOptions::firstBucketBytes
  size_t bucketCapBytes = size_t{25} << 20;   ///< as DataParallelOptions::bucketCapBytes
};

/// ZeRO (stages 1 and 2) on the data-parallel reducer: each rank owns 1/N of every gradient
/// bucket (part r of bucket b: elements [r * ceil(n_b / N), ...)), keeps the optimizer's state for
/// that part only, steps it with the averaged gradient, and all-gathers the updated parameters,
/// so every rank ends each step with the same parameters as DataParallelOptimizer would give, at
/// about 1/N of the optimizer state.
///
/// The optimizer owns its reducer (buckets must not move under the shards: rebuildBuckets is
/// off): call reducer().markGradReady(i) as gradients finish, reducer().syncParameters() once, and
/// step() after each backward. What is averaged: stage 1, every gradient, in place; stage 2, only
/// this rank's part of each bucket, reduce-scattered straight into the optimizer's shard, so the
/// registered gradients keep this rank's own, unreduced values. Stage 2's buckets are transient
/// (DataParallelOptions::transientBuckets): besides the framework's gradients, it holds 1/N of
/// the gradients plus the buckets being reduced, where stage 1 holds a full-size copy. The
/// parameters are gathered through transient buffers, two buckets at a time.
///
/// Errors: InvalidArgument for a stage other than 1 or 2, a bad optimizer spec, and what the
/// reducer refuses at registration; step() throws what finalizeBackward or the collectives throw.
/// Threading: as the reducer's finalizeBackward.
class ZeroOptimizer {
 public:
  /// Registers parameters with a reducer of its own and shards its buckets. Not collective (as
  /// the reducer's construction).
  /// \param group the data-parallel ranks; must outlive the optimizer.
  /// \param parameters every parameter, each with its gradient tensor (required: the shards are
  ///        read from the registered gradients); the same on every rank. A bucket's parameters
  ///        share one dtype.
  /// \param spec the optimizer that steps this rank's shard (makeOptimizer).
  /// \param options the stage and the bucket sizes.
  /// \throws InvalidArgument for a stage other than 1 or 2, a bad spec, a parameter without a
  ///         gradient, a bucket mixing dtypes, and what the reducer refuses.
  ZeroOptimizer(ProcessGroup& group, std::vector<DataParallelParameter> parameters,
                const OptimizerSpec& spec, ZeroOptions options = {});
  ~ZeroOptimizer();
  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  /// \return The optimizer's own reducer: mark gradients ready and sync parameters through it.
  DistributedDataParallel& reducer();

  /// Finishes the backward and, unless it was a no-sync one (returns false), steps this rank's
  /// shard and all-gathers every bucket's updated parameters.
  /// \return false after a no-sync backward (nothing stepped), else true.
  bool step();

  /// Bytes of optimizer state this rank holds.
  /// \return Those bytes.
  size_t optimizerStateBytes() const;
  /// Elements of the parameters this rank owns (its parts of the buckets).
  /// \return That count, padding excluded.
  int64_t shardElements() const;

  /// Adds the training state to a checkpoint: every parameter whole as "<prefix><name>" (every
  /// rank holds them all, so a save writes each once) and this rank's part of the optimizer's
  /// state as slices of "<prefix>optim.<name>.<buffer>" and "<prefix>optim.<name>.step", the
  /// names DataParallelOptimizer::addToState uses: a checkpoint of either loads into the other,
  /// at any world size. \<name\> is the parameter's registered name, or "param<i>" without one.
  /// Before the first step the optimizer's state is zeros, which a load fills.
  /// \param state the checkpoint state to add to; it refers to the parameters and to this
  ///        optimizer's shards, so the optimizer must outlive its save or load.
  /// \param prefix put before every name; empty for none.
  void addToState(checkpoint::State& state, const std::string& prefix = "");

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace c10d::inline v1
