// scatter from a root over gloo::scatter.

#include <gloo/scatter.h>

#include <cstring>

#include "backends/gloo/ops/Collectives.hpp"

namespace c10d::inline v1::gloo_ops {

void scatter(Runtime& runtime, const Op& op, const OpTensors& tensors) {
  const Tensor& output = *tensors.output;
  const std::vector<Tensor>& inputs = *tensors.inputs;
  const size_t bytes = output.nbytes();
  if (runtime.size == 1 || bytes == 0) {
    if (!inputs.empty()) copyBytes(output.data(), inputs[0].data(), bytes);
    return;
  }
  const auto tag = static_cast<uint32_t>(op.seq);
  gloo::ScatterOptions gloo(runtime.context());
  if (runtime.rank == op.root) {
    std::vector<uint8_t*> pointers;
    for (const Tensor& input : inputs) pointers.push_back(bytesOf(input));
    gloo.setInputs<uint8_t>(pointers, bytes);
  }
  gloo.setOutput<uint8_t>(bytesOf(output), bytes);
  gloo.setRoot(op.root);
  gloo.setTag(tag);
  gloo.setTimeout(op.timeout);
  runtime.agree(tag, op.timeout);
  gloo::scatter(gloo);
}

}  // namespace c10d::inline v1::gloo_ops
