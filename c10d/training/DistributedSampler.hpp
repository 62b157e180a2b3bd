#pragma once

/// \file
/// DistributedSampler: splits a dataset's indices evenly among the ranks, with a shuffle that is
/// the same on every rank (torch.utils.data.DistributedSampler).
///
/// Splits the indices of a dataset among the ranks of a job so that every rank gets the same
/// number of samples (as torch.utils.data.DistributedSampler does): the index list is padded by
/// repeating its start, or its tail is dropped, to a multiple of the number of replicas, then
/// rank r takes every numReplicas-th index starting at r. With shuffle, the order is a
/// permutation drawn from seed + epoch, the same on every rank, new each epoch (setEpoch).
///
/// The permutation uses std::mt19937_64 and its own unbiased draws (not std::shuffle or
/// std::uniform_int_distribution, whose results differ between standard libraries), so ranks
/// built with different toolchains agree.
///
/// Errors: InvalidArgument for numReplicas < 1, a rank outside [0, numReplicas), or dropLast with
/// fewer samples than replicas. Threading: a plain value type.

#include <cstdint>
#include <string>
#include <vector>

#include "c10d/checkpoint/State.hpp"

namespace c10d::inline v1 {

/// How a DistributedSampler orders and pads the indices.
struct DistributedSamplerOptions {
  bool shuffle = true;  ///< permute the indices each epoch; false: dataset order
  uint64_t seed = 0;    ///< with epoch, seeds the permutation; the same on every rank
  /// true: drop the tail so that no sample is repeated; false: repeat samples to pad.
  bool dropLast = false;
};

/// One rank's share of a dataset's indices, epoch by epoch: every rank gets the same number of
/// samples, from one order that is the same on every rank. A plain value type; no collectives.
class DistributedSampler {
 public:
  /// A sampler at epoch 0, from the epoch's first sample.
  /// \param datasetSize The number of samples, indices [0, datasetSize); >= 0.
  /// \param numReplicas The number of ranks sharing the dataset; >= 1.
  /// \param rank This rank, in [0, numReplicas).
  /// \param options Shuffle, seed and dropLast.
  /// \throws InvalidArgument for a negative datasetSize, numReplicas < 1, a rank out of range, or
  /// dropLast with fewer samples than replicas.
  DistributedSampler(int64_t datasetSize, int numReplicas, int rank,
                     DistributedSamplerOptions options = {});

  /// The permutation of the next indices() call; the same epoch gives the same order. Starts the
  /// epoch from its first sample (setStartIndex(0)).
  /// \param epoch The epoch; with the seed, it draws the permutation.
  void setEpoch(uint64_t epoch);
  /// \return The current epoch (0 until setEpoch).
  uint64_t epoch() const { return epoch_; }
  /// Resumes the current epoch after its first consumed samples in the epoch's order (over all
  /// replicas: rank r took every numReplicas-th one): indices() then splits only the rest among
  /// the replicas, padded or trimmed as above, so a job resumed at another world size still sees
  /// every sample of the epoch once. Throws InvalidArgument for a negative count.
  /// \param consumed How many of the epoch's samples every replica together already took; one
  /// at or past the dataset's size leaves nothing (numSamples() 0).
  void setStartIndex(int64_t consumed);
  /// \return The epoch's samples already consumed (setStartIndex), 0 from setEpoch.
  int64_t startIndex() const { return start_; }

  /// Adds the sampler's place to a checkpoint as values "<prefix>epoch", "<prefix>seed" and
  /// "<prefix>consumed" (the epoch's samples taken by every replica: startIndex() plus
  /// takenOnThisRank per replica, the same on every rank of a job in step); a load sets them
  /// back (setEpoch, setStartIndex), at any number of replicas. The sampler must outlive the load.
  /// \param state The checkpoint state to add to; its load also restores the seed.
  /// \param prefix Prepended to the names.
  /// \param takenOnThisRank How many of this epoch's indices() this rank has consumed; >= 0.
  /// \throws InvalidArgument for a negative takenOnThisRank.
  void addToState(checkpoint::State& state, const std::string& prefix, int64_t takenOnThisRank);
  /// This rank's indices for the current epoch, numSamples() of them.
  /// \return Dataset indices, in the order to take them.
  std::vector<int64_t> indices() const;
  /// This rank's share of positions [first, first + count) of the current epoch's order (whole,
  /// from position 0, startIndex() aside): positions first + rank, first + rank + numReplicas,
  /// ... below first + count and the dataset's size, with no padding and nothing dropped. So a
  /// step that takes a fixed window of the epoch uses each of its samples once, on one replica,
  /// whatever the number of replicas; after a membership change (c10d::elastic), reshard and go
  /// on from the committed step's window. Throws InvalidArgument for a negative first or count.
  /// \param first The window's first position in the epoch's order; >= 0.
  /// \param count The window's length, in positions of the whole epoch (all replicas); >= 0.
  /// \return This rank's dataset indices in the window, in order; the ranks' counts may differ
  /// (and be 0) where the window or the dataset ends.
  std::vector<int64_t> window(int64_t first, int64_t count) const;
  /// A new place for this replica among numReplicas (the epoch, its order and startIndex() kept);
  /// throws InvalidArgument as the constructor does.
  /// \param numReplicas The new number of replicas; >= 1.
  /// \param rank This replica's new rank, in [0, numReplicas).
  void reshard(int numReplicas, int rank);
  /// \return How many indices indices() returns: the rest of the epoch after startIndex(), divided
  /// among the replicas (rounded up, or down with dropLast).
  int64_t numSamples() const { return numSamples_; }
  /// numSamples() * numReplicas: the padded or trimmed length of the whole epoch.
  /// \return That length.
  int64_t totalSize() const { return numSamples_ * numReplicas_; }

 private:
  int64_t datasetSize_;
  int numReplicas_;
  int rank_;
  DistributedSamplerOptions options_;
  void countSamples();
  /// The current epoch's order of the whole dataset.
  std::vector<int64_t> order() const;

  uint64_t epoch_ = 0;
  int64_t start_ = 0;
  int64_t numSamples_ = 0;
};

}  // namespace c10d::inline v1
