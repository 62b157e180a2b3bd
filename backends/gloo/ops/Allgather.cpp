// allgather (list out) and allgather_into_tensor (flat out): the mesh (a ring, layered
// across hosts), else gloo::allgather.

#include <gloo/allgather.h>

#include <cstring>

#include "backends/gloo/ops/Collectives.hpp"

namespace c10d::inline v1::gloo_ops {
namespace {

// Gathers input from every rank into flat (size * input bytes), rank r's at offset r.
void allgatherFlat(Runtime& runtime, const Op& op, const Tensor& input, uint8_t* flat) {
  const size_t bytes = input.nbytes();
  if (runtime.size == 1 || bytes == 0) {
    copyBytes(flat, input.data(), bytes);
    return;
  }
  if (MeshAlgorithms* fast = runtime.fastPath(bytes * runtime.size)) {
    copyBytes(flat + runtime.rank * bytes, input.data(), bytes);
    fast->allgather(flat, bytes);
    return;
  }
  const auto tag = static_cast<uint32_t>(op.seq);
  gloo::AllgatherOptions options(runtime.context());
  options.setInput<uint8_t>(bytesOf(input), bytes);
  options.setOutput<uint8_t>(flat, bytes * runtime.size);
  options.setTag(tag);
  options.setTimeout(op.timeout);
  runtime.agree(tag, op.timeout);
  gloo::allgather(options);
}

}  // namespace

void allgather(Runtime& runtime, const Op& op, const OpTensors& tensors) {
  const Tensor& input = *tensors.input;
  const std::vector<Tensor>& outputs = *tensors.outputs;
  uint8_t* flat = runtime.scratch(input.nbytes() * runtime.size);
  allgatherFlat(runtime, op, input, flat);
  for (size_t r = 0; r < outputs.size(); ++r) {
    copyBytes(outputs[r].data(), flat + r * input.nbytes(), input.nbytes());
  }
}

void allgatherIntoTensor(Runtime& runtime, const Op& op, const OpTensors& tensors) {
  allgatherFlat(runtime, op, *tensors.input, bytesOf(*tensors.output));
}

}  // namespace c10d::inline v1::gloo_ops
