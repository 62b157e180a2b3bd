#pragma once

// Parameters for the optimizer tests (ZeRO, checkpoints): float32 vectors of the given sizes,
// filled with cos(0.1 k + i), each with a zero gradient and the name nameOf(i).

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "c10d/training/DistributedDataParallel.hpp"

namespace c10d::inline v1::test {

inline std::vector<DataParallelParameter> cosineParameters(
    const std::vector<int64_t>& sizes, const std::function<std::string(size_t)>& nameOf) {
  std::vector<DataParallelParameter> params;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Tensor value = Tensor::empty({sizes[i]}, ScalarType::Float32);
    for (int64_t k = 0; k < sizes[i]; ++k) value.data<float>()[k] = std::cos(0.1f * k + i);
    params.push_back({value, Tensor::zeros({sizes[i]}, ScalarType::Float32), nameOf(i)});
  }
  return params;
}

}  // namespace c10d::inline v1::test
