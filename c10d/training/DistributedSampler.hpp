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
#include <vector>

namespace c10d::inline v0 {

struct DistributedSamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  // true: drop the tail so that no sample is repeated; false: repeat samples to pad.
  bool dropLast = false;
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t datasetSize, int numReplicas, int rank,
                     DistributedSamplerOptions options = {});

  // The permutation of the next indices() call; the same epoch gives the same order.
  void setEpoch(uint64_t epoch) { epoch_ = epoch; }
  // This rank's indices for the current epoch, numSamples() of them.
  std::vector<int64_t> indices() const;
  int64_t numSamples() const { return numSamples_; }
  // numSamples() * numReplicas: the padded or trimmed length of the whole epoch.
  int64_t totalSize() const { return numSamples_ * numReplicas_; }

 private:
  int64_t datasetSize_;
  int numReplicas_;
  int rank_;
  DistributedSamplerOptions options_;
  uint64_t epoch_ = 0;
  int64_t numSamples_;
};

}  // namespace c10d::inline v0
