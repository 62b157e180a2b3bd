#pragma once

#include <memory>
#include <string>
#include <vector>

#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1 {

/// How many ways a job is cut along each axis of combined parallelism. Their product is the world
/// size.
struct ParallelSizes {
  int data = 1;
  int tensor = 1;
  int pipeline = 1;
};

/// Where a rank sits along each axis.
struct ParallelCoordinates {
  int data = 0;
  int tensor = 0;
  int pipeline = 0;
  bool operator==(const ParallelCoordinates&) const = default;
};

/// The process groups of combined data × tensor × pipeline parallelism, in Megatron-LM's order:
/// tensor-parallel ranks are consecutive (they exchange the most, every layer, so they share a
/// host first), then data-parallel replicas, then pipeline stages: global rank
/// r = (pipeline * data + d) * tensor + t. Each rank gets the three groups it is in:
///   tensor:   the ranks of its stage and replica (the layer's shards),
///   data:     the ranks holding the same shard of the same stage (gradients are averaged here),
///   pipeline: the ranks of its shard and replica, one per stage, in stage order.
///
/// Construction is collective over world (three splits): every rank calls it with the same sizes.
/// Throws InvalidArgument when a size is below 1 or their product is not world's size.
class ParallelLayout {
 public:
  ParallelLayout(ProcessGroup& world, ParallelSizes sizes);

  const ParallelSizes& sizes() const { return sizes_; }
  const ParallelCoordinates& coordinates() const { return mine_; }
  ProcessGroup& data() const { return *data_; }
  ProcessGroup& tensor() const { return *tensor_; }
  ProcessGroup& pipeline() const { return *pipeline_; }

  /// The arithmetic of the layout, for any rank.
  static ParallelCoordinates coordinatesOf(int rank, const ParallelSizes& sizes);
  static int rankAt(const ParallelCoordinates& at, const ParallelSizes& sizes);
  /// The world ranks of the group of the given axis ("data", "tensor", "pipeline") that rank is in.
  static std::vector<int> groupOf(int rank, const std::string& axis, const ParallelSizes& sizes);

  /// Every rank's place and groups, one line per rank ("rank 5: data 1 [1 5], tensor 1 [4 5],
  /// pipeline 1 [1 5]"), for printing on request.
  static std::string describe(const ParallelSizes& sizes);

 private:
  ParallelSizes sizes_;
  ParallelCoordinates mine_;
  std::shared_ptr<ProcessGroup> data_;
  std::shared_ptr<ProcessGroup> tensor_;
  std::shared_ptr<ProcessGroup> pipeline_;
};

}  // namespace c10d::inline v1
