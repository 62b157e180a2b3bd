// reduce_scatter (list in) and reduce_scatter_tensor (flat in): on the mesh (a ring, or
// layered across hosts). Gloo 0.5 has none over unbound buffers, so off the mesh we allreduce
// a copy of the whole input there and keep our block (twice the bytes).

#include <gloo/allreduce.h>

#include <cstring>

#include "backends/common/Reduce.hpp"
#include "backends/gloo/ops/Collectives.hpp"

namespace c10d::inline v1::gloo_ops {
namespace {

// flat: size() blocks of output's size, the op's input; output gets our block's reduction.
void reduceScatterFlat(Runtime& runtime, const Op& op, uint8_t* flat, const Tensor& output) {
  const ScalarType dtype = output.dtype();
  const size_t count = static_cast<size_t>(output.numel()) * runtime.size;
  const size_t bytes = count * elementSize(dtype);
  prepareReduce(op.reduceOp, dtype, flat, count);
  if (MeshAlgorithms* fast = runtime.fastPath(bytes); fast != nullptr && count > 0) {
    fast->reduceScatter(flat, output.numel(), elementSize(dtype),
                        reduceFunction(op.reduceOp, dtype));
  } else if (count > 0 && runtime.size > 1) {
    const auto tag = static_cast<uint32_t>(op.seq);
    gloo::AllreduceOptions options(runtime.context());
    withWordOfSize(elementSize(dtype),
                   [&]<typename W>() { options.setOutput<W>(reinterpret_cast<W*>(flat), count); });
    options.setReduceFunction(reduceFunction(op.reduceOp, dtype));
    options.setTag(tag);
    options.setTimeout(op.timeout);
    runtime.agree(tag, op.timeout);
    gloo::allreduce(options);
  }
  copyBytes(output.data(), flat + runtime.rank * output.nbytes(), output.nbytes());
  finishReduce(op.reduceOp, dtype, output.data(), output.numel(), runtime.size);
}

}  // namespace

void reduceScatter(Runtime& runtime, const Op& op, const OpTensors& tensors) {
  const Tensor& output = *tensors.output;
  const std::vector<Tensor>& inputs = *tensors.inputs;
  uint8_t* flat = runtime.scratch(output.nbytes() * inputs.size());
  for (size_t r = 0; r < inputs.size(); ++r) {
    copyBytes(flat + r * output.nbytes(), inputs[r].data(), output.nbytes());
  }
  reduceScatterFlat(runtime, op, flat, output);
}

void reduceScatterTensor(Runtime& runtime, const Op& op, const OpTensors& tensors) {
  const Tensor& input = *tensors.input;
  uint8_t* flat = runtime.scratch(input.nbytes());
  copyBytes(flat, input.data(), input.nbytes());
  reduceScatterFlat(runtime, op, flat, *tensors.output);
}

}  // namespace c10d::inline v1::gloo_ops
