#include "benchmarks/comm_bench/Buffers.hpp"

#include <algorithm>

#include "benchmarks/comm_bench/Ops.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/ScalarType.hpp"

namespace commbench {

Buffers allocate(Op op, const Options& options, int ranks, const c10d::Device& device,
                 bool scratch) {
  Shape largest = shapeFor(op, options.maxBytes, ranks, c10d::elementSize(options.dtype));
  Buffers buffers;
  auto bytes = [&](int64_t count) {
    return std::max<int64_t>(count, 1) * static_cast<int64_t>(c10d::elementSize(options.dtype));
  };
  buffers.input = Tensor::empty({bytes(largest.inputCount)}, ScalarType::UInt8, device);
  buffers.hostInput = device.isCPU()
                          ? buffers.input
                          : Tensor::empty({bytes(largest.inputCount)}, ScalarType::UInt8);
  if (largest.outputCount > 0) {
    buffers.output = Tensor::empty({bytes(largest.outputCount)}, ScalarType::UInt8, device);
    buffers.hostOutput = device.isCPU()
                             ? buffers.output
                             : Tensor::empty({bytes(largest.outputCount)}, ScalarType::UInt8);
  }
  if (scratch) buffers.scratch = Tensor::empty({bytes(largest.inputCount)}, ScalarType::UInt8);
  return buffers;
}

Tensor view(const Tensor& memory, int64_t count, ScalarType dtype) {
  return Tensor::fromBlob(memory.data(), dtype, {count}, memory.device());
}

void upload(const Case& c) {
  if (c.input.device().isCPU()) return;
  c10d::copyTensor(c.input, c.hostInput);
  if (c.output.data() != c.input.data()) c10d::copyTensor(c.output, c.hostOutput);
}

void download(const Case& c) {
  if (c.input.device().isCPU()) return;
  c10d::copyTensor(c.hostInput, c.input);
  if (c.output.data() != c.input.data()) c10d::copyTensor(c.hostOutput, c.output);
}

}  // namespace commbench
