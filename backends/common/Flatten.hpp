#pragma once

// Copies between a list of tensors and one contiguous buffer, for backends whose library takes
// a single buffer where ProcessGroup takes a list (allgather, scatter, reduce_scatter, alltoall).

#include <cstring>
#include <vector>

#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

// memcpy that accepts the null pointers of empty tensors (memcpy's contract forbids them even for
// zero bytes).
inline void copyBytes(void* destination, const void* source, size_t bytes) {
  if (bytes > 0) std::memcpy(destination, source, bytes);
}

// parts, one after another, in a new CPU tensor of dtype.
inline Tensor packTensors(const std::vector<Tensor>& parts, ScalarType dtype) {
  size_t bytes = 0;
  for (const Tensor& part : parts) bytes += part.nbytes();
  Tensor flat = Tensor::empty({static_cast<int64_t>(bytes / elementSize(dtype))}, dtype);
  auto* out = static_cast<char*>(flat.data());
  for (const Tensor& part : parts) {
    copyBytes(out, part.data(), part.nbytes());
    out += part.nbytes();
  }
  return flat;
}

// The inverse: flat's bytes, in order, into parts.
inline void unpackTensors(const Tensor& flat, const std::vector<Tensor>& parts) {
  const auto* in = static_cast<const char*>(flat.data());
  for (const Tensor& part : parts) {
    copyBytes(part.data(), in, part.nbytes());
    in += part.nbytes();
  }
}

}  // namespace c10d::inline v1
