// gather to a root over gloo::gather.

#include <gloo/gather.h>

#include <cstring>

#include "backends/gloo/ops/Collectives.hpp"

namespace c10d::inline v1::gloo_ops {

void gather(Runtime& runtime, const Op& op, const OpTensors& tensors) {
  const Tensor& input = *tensors.input;
  const std::vector<Tensor>& outputs = *tensors.outputs;
  const size_t bytes = input.nbytes();
  const bool root = runtime.rank == op.root;
  uint8_t* flat = root ? runtime.scratch(bytes * runtime.size) : nullptr;
  if (runtime.size == 1 || bytes == 0) {
    if (root) copyBytes(flat, input.data(), bytes);
  } else {
    const auto tag = static_cast<uint32_t>(op.seq);
    gloo::GatherOptions gloo(runtime.context());
    gloo.setInput<uint8_t>(bytesOf(input), bytes);
    if (root) gloo.setOutput<uint8_t>(flat, bytes * runtime.size);
    gloo.setRoot(op.root);
    gloo.setTag(tag);
    gloo.setTimeout(op.timeout);
    runtime.agree(tag, op.timeout);
    gloo::gather(gloo);
  }
  for (size_t r = 0; r < outputs.size(); ++r) {
    copyBytes(outputs[r].data(), flat + r * bytes, bytes);
  }
}

}  // namespace c10d::inline v1::gloo_ops
