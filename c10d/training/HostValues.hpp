#pragma once

/// \file
/// Private to c10d/training: small collectives on host integers (detail::allgatherValues).
///
/// Private to c10d/training: small collectives on host integers (flags, counts, descriptions) that
/// the reducer and the fusion queue exchange beside the data. The group may serve only CUDA
/// tensors (NCCL), so the values travel in a tensor on the device the caller names.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1::detail {

/// Runs collective(tensor) on values copied to device, and returns the tensor's values after it.
template <typename Collective>
std::vector<int64_t> onDevice(const std::vector<int64_t>& values, const Device& device,
                              Collective&& collective) {
  std::vector<int64_t> result = values;
  Tensor host =
      Tensor::fromBlob(result.data(), ScalarType::Int64, {static_cast<int64_t>(result.size())});
  if (device.isCPU()) {
    collective(host);
    return result;
  }
  Tensor tensor = Tensor::empty(host.sizes(), ScalarType::Int64, device);
  copyTensor(tensor, host);
  collective(tensor);
  copyTensor(host, tensor);
  return result;
}

/// Every rank's values, whatever their lengths, in rank order: the lengths first, then one row per
/// rank that only its owner fills (the rest -1), combined with MAX, which is an allgather that
/// needs no list of outputs. Values must be >= -1.
inline std::vector<std::vector<int64_t>> allgatherValues(ProcessGroup& group,
                                                         const std::vector<int64_t>& mine,
                                                         const Device& device) {
  const int size = group.size();
  std::vector<int64_t> lengths(size, 0);
  lengths[group.rank()] = static_cast<int64_t>(mine.size());
  lengths = onDevice(lengths, device, [&](const Tensor& t) {
    group.allreduce(t, {.reduceOp = ReduceOp::MAX})->wait();
  });
  const int64_t longest = std::max<int64_t>(1, *std::max_element(lengths.begin(), lengths.end()));
  std::vector<int64_t> rows(static_cast<size_t>(longest) * size, -1);
  std::copy(mine.begin(), mine.end(), rows.begin() + longest * group.rank());
  rows = onDevice(rows, device, [&](const Tensor& t) {
    group.allreduce(t, {.reduceOp = ReduceOp::MAX})->wait();
  });
  std::vector<std::vector<int64_t>> all(size);
  for (int r = 0; r < size; ++r) {
    all[r].assign(rows.begin() + longest * r, rows.begin() + longest * r + lengths[r]);
  }
  return all;
}

}  // namespace c10d::inline v1::detail
