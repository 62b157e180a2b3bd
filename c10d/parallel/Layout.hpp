#pragma once

/// \file
/// ParallelLayout: the process groups of combined data, tensor and pipeline parallelism.

#include <memory>
#include <string>
#include <vector>

#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1 {

/// How many ways a job is cut along each axis of combined parallelism. Their product is the world
/// size.
struct ParallelSizes {
  int data = 1;      ///< data-parallel replicas (at least 1)
  int tensor = 1;    ///< tensor-parallel shards of each layer (at least 1)
  int pipeline = 1;  ///< pipeline stages (at least 1)
};

/// Where a rank sits along each axis.
struct ParallelCoordinates {
  int data = 0;      ///< the replica, in [0, ParallelSizes::data)
  int tensor = 0;    ///< the shard, in [0, ParallelSizes::tensor)
  int pipeline = 0;  ///< the stage, in [0, ParallelSizes::pipeline)
  /// \return Whether both name the same place on every axis.
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
  /// Splits world into this rank's three groups (collective over world).
  /// \param world the job's group; the groups split from it are owned by this object.
  /// \param sizes the same on every rank; their product must be world's size.
  /// \throws InvalidArgument when a size is below 1 or their product is not world's size.
  ParallelLayout(ProcessGroup& world, ParallelSizes sizes);

  /// \return The sizes the layout was made with.
  const ParallelSizes& sizes() const { return sizes_; }
  /// \return This rank's place along each axis.
  const ParallelCoordinates& coordinates() const { return mine_; }
  /// \return This rank's data-parallel group (its rank there is coordinates().data).
  ProcessGroup& data() const { return *data_; }
  /// \return This rank's tensor-parallel group (its rank there is coordinates().tensor).
  ProcessGroup& tensor() const { return *tensor_; }
  /// \return This rank's pipeline group, in stage order (its rank there is
  ///         coordinates().pipeline).
  ProcessGroup& pipeline() const { return *pipeline_; }

  /// The arithmetic of the layout, for any rank.
  /// \param rank a world rank, in [0, the product of sizes).
  /// \param sizes the layout's sizes.
  /// \return Where rank sits along each axis.
  static ParallelCoordinates coordinatesOf(int rank, const ParallelSizes& sizes);
  /// The inverse of coordinatesOf.
  /// \param at a place, each coordinate within its size.
  /// \param sizes the layout's sizes.
  /// \return The world rank at that place.
  static int rankAt(const ParallelCoordinates& at, const ParallelSizes& sizes);
  /// The world ranks of the group of the given axis ("data", "tensor", "pipeline") that rank is in.
  /// \param rank a world rank, in [0, the product of sizes).
  /// \param axis "data", "tensor" or "pipeline".
  /// \param sizes the layout's sizes.
  /// \return Those ranks, in order of their coordinate along axis (their rank in that group).
  /// \throws InvalidArgument for another axis name.
  static std::vector<int> groupOf(int rank, const std::string& axis, const ParallelSizes& sizes);

  /// Every rank's place and groups, one line per rank ("rank 5: data 1 [1 5], tensor 1 [4 5],
  /// pipeline 1 [1 5]"), for printing on request.
  /// \param sizes the layout's sizes.
  /// \return Those lines, each ending in a newline.
  static std::string describe(const ParallelSizes& sizes);

 private:
  ParallelSizes sizes_;
  ParallelCoordinates mine_;
  std::shared_ptr<ProcessGroup> data_;
  std::shared_ptr<ProcessGroup> tensor_;
  std::shared_ptr<ProcessGroup> pipeline_;
};

}  // namespace c10d::inline v1
