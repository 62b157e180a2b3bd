#pragma once

// Splits the indices of a dataset among the ranks of a job so that every rank gets the same
// number of samples (as torch.utils.data.DistributedSampler does): the index list is padded by
// repeating its start, or its tail is dropped, to a multiple of the number of replicas, then
// rank r takes every numReplicas-th index starting at r. With shuffle, the order is a
// permutation drawn from seed + epoch, the same on every rank, new each epoch (setEpoch).
//
// The permutation uses std::mt19937_64 and its own unbiased draws (not std::shuffle or
// std::uniform_int_distribution, whose results differ between standard libraries), so ranks
// built with different toolchains agree.
//
// Errors: InvalidArgument for numReplicas < 1, a rank outside [0, numReplicas), or dropLast with
// fewer samples than replicas. Threading: a plain value type.

#include <cstdint>
#include <string>
#include <vector>

#include "c10d/checkpoint/State.hpp"

namespace c10d::inline v1 {

struct DistributedSamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  /// true: drop the tail so that no sample is repeated; false: repeat samples to pad.
  bool dropLast = false;
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t datasetSize, int numReplicas, int rank,
                     DistributedSamplerOptions options = {});

  /// The permutation of the next indices() call; the same epoch gives the same order. Starts the
  /// epoch from its first sample (setStartIndex(0)).
  void setEpoch(uint64_t epoch);
  uint64_t epoch() const { return epoch_; }
  /// Resumes the current epoch after its first consumed samples in the epoch's order (over all
  /// replicas: rank r took every numReplicas-th one): indices() then splits only the rest among
  /// the replicas, padded or trimmed as above, so a job resumed at another world size still sees
  /// every sample of the epoch once. Throws InvalidArgument for a negative count.
  void setStartIndex(int64_t consumed);
  int64_t startIndex() const { return start_; }

  /// Adds the sampler's place to a checkpoint as values "<prefix>epoch", "<prefix>seed" and
  /// "<prefix>consumed" (the epoch's samples taken by every replica: startIndex() plus
  /// takenOnThisRank per replica, the same on every rank of a job in step); a load sets them
  /// back (setEpoch, setStartIndex), at any number of replicas. The sampler must outlive the load.
  void addToState(checkpoint::State& state, const std::string& prefix, int64_t takenOnThisRank);
  /// This rank's indices for the current epoch, numSamples() of them.
  std::vector<int64_t> indices() const;
  /// This rank's share of positions [first, first + count) of the current epoch's order (whole,
  /// from position 0, startIndex() aside): positions first + rank, first + rank + numReplicas,
  /// ... below first + count and the dataset's size, with no padding and nothing dropped. So a
  /// step that takes a fixed window of the epoch uses each of its samples once, on one replica,
  /// whatever the number of replicas; after a membership change (c10d::elastic), reshard and go
  /// on from the committed step's window. Throws InvalidArgument for a negative first or count.
  std::vector<int64_t> window(int64_t first, int64_t count) const;
  /// A new place for this replica among numReplicas (the epoch, its order and startIndex() kept);
  /// throws InvalidArgument as the constructor does.
  void reshard(int numReplicas, int rank);
  int64_t numSamples() const { return numSamples_; }
  /// numSamples() * numReplicas: the padded or trimmed length of the whole epoch.
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
