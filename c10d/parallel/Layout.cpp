#include "c10d/parallel/Layout.hpp"

#include <sstream>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {
namespace {

void checkSizes(const ParallelSizes& sizes, int worldSize) {
  C10D_CHECK(sizes.data >= 1 && sizes.tensor >= 1 && sizes.pipeline >= 1, InvalidArgument,
             "ParallelLayout: sizes must be at least 1 (data ", sizes.data, ", tensor ",
             sizes.tensor, ", pipeline ", sizes.pipeline, ")");
  C10D_CHECK(static_cast<int64_t>(sizes.data) * sizes.tensor * sizes.pipeline == worldSize,
             InvalidArgument, "ParallelLayout: data ", sizes.data, " x tensor ", sizes.tensor,
             " x pipeline ", sizes.pipeline, " = ",
             static_cast<int64_t>(sizes.data) * sizes.tensor * sizes.pipeline,
             " ranks, but the group has ", worldSize);
}

}  // namespace

ParallelCoordinates ParallelLayout::coordinatesOf(int rank, const ParallelSizes& sizes) {
  return {(rank / sizes.tensor) % sizes.data, rank % sizes.tensor,
          rank / (sizes.tensor * sizes.data)};
}

int ParallelLayout::rankAt(const ParallelCoordinates& at, const ParallelSizes& sizes) {
  return (at.pipeline * sizes.data + at.data) * sizes.tensor + at.tensor;
}

std::vector<int> ParallelLayout::groupOf(int rank, const std::string& axis,
                                         const ParallelSizes& sizes) {
  ParallelCoordinates at = coordinatesOf(rank, sizes);
  int* moving = axis == "data"       ? &at.data
                : axis == "tensor"   ? &at.tensor
                : axis == "pipeline" ? &at.pipeline
                                     : nullptr;
  C10D_CHECK(moving != nullptr, InvalidArgument, "ParallelLayout: no axis '", axis,
             "'; the axes are data, tensor and pipeline");
  int extent = axis == "data" ? sizes.data : axis == "tensor" ? sizes.tensor : sizes.pipeline;
  std::vector<int> ranks;
  for (int i = 0; i < extent; ++i) {
    *moving = i;
    ranks.push_back(rankAt(at, sizes));
  }
  return ranks;
}

std::string ParallelLayout::describe(const ParallelSizes& sizes) {
  std::ostringstream out;
  const int world = sizes.data * sizes.tensor * sizes.pipeline;
  auto list = [&](int rank, const char* axis) {
    std::string text;
    for (int r : groupOf(rank, axis, sizes)) text += (text.empty() ? "" : " ") + std::to_string(r);
    return "[" + text + "]";
  };
  for (int rank = 0; rank < world; ++rank) {
    ParallelCoordinates at = coordinatesOf(rank, sizes);
    out << "rank " << rank << ": data " << at.data << " " << list(rank, "data") << ", tensor "
        << at.tensor << " " << list(rank, "tensor") << ", pipeline " << at.pipeline << " "
        << list(rank, "pipeline") << "\n";
  }
  return out.str();
}

ParallelLayout::ParallelLayout(ProcessGroup& world, ParallelSizes sizes) : sizes_(sizes) {
  checkSizes(sizes, world.size());
  mine_ = coordinatesOf(world.rank(), sizes);
  // Each split's color names the group (the fixed coordinates), its key orders the ranks in it
  // (the moving one): the group's rank is then the rank's coordinate along that axis.
  tensor_ = world.split(mine_.pipeline * sizes.data + mine_.data, mine_.tensor);
  data_ = world.split(mine_.pipeline * sizes.tensor + mine_.tensor, mine_.data);
  pipeline_ = world.split(mine_.data * sizes.tensor + mine_.tensor, mine_.pipeline);
}

}  // namespace c10d::inline v1
