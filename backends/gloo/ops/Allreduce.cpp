// allreduce and allreduce_coalesced: on the mesh (recursive doubling, a ring for large
// buffers, layered across hosts), else gloo::allreduce; with our reduce functions, so every
// dtype (bfloat16 included) and every ReduceOp works.

#include <gloo/allreduce.h>

#include <cstring>

#include "backends/common/Reduce.hpp"
#include "backends/gloo/ops/Collectives.hpp"

namespace c10d::inline v1::gloo_ops {
namespace {

void allreduceInPlace(Runtime& runtime, void* data, ScalarType dtype, size_t count,
                      const ReduceOp& op, uint32_t tag, std::chrono::milliseconds timeout) {
  prepareReduce(op, dtype, data, count);
  if (MeshAlgorithms* fast = runtime.fastPath(count * elementSize(dtype));
      fast != nullptr && count > 0) {
    fast->allreduce(data, count, elementSize(dtype), reduceFunction(op, dtype));
  } else if (count > 0 && runtime.size > 1) {
    gloo::AllreduceOptions options(runtime.context());
    withWordOfSize(elementSize(dtype),
                   [&]<typename W>() { options.setOutput<W>(static_cast<W*>(data), count); });
    options.setReduceFunction(reduceFunction(op, dtype));
    options.setTag(tag);
    options.setTimeout(timeout);
    runtime.agree(tag, timeout);
    gloo::allreduce(options);
  }
  finishReduce(op, dtype, data, count, runtime.size);
}

}  // namespace

void allreduce(Runtime& runtime, const Op& op, const OpTensors& tensors) {
  const Tensor& tensor = *tensors.input;
  allreduceInPlace(runtime, tensor.data(), tensor.dtype(), tensor.numel(), op.reduceOp,
                   static_cast<uint32_t>(op.seq), op.timeout);
}

// One flat buffer, one allreduce: many small tensors cost one round of latency.
void allreduceCoalesced(Runtime& runtime, const Op& op, const OpTensors& tensors) {
  const std::vector<Tensor>& list = *tensors.inputs;
  uint8_t* flat = runtime.scratch(static_cast<size_t>(op.count) * elementSize(op.dtype));
  size_t offset = 0;
  for (const Tensor& tensor : list) {
    copyBytes(flat + offset, tensor.data(), tensor.nbytes());
    offset += tensor.nbytes();
  }
  allreduceInPlace(runtime, flat, op.dtype, static_cast<size_t>(op.count), op.reduceOp,
                   static_cast<uint32_t>(op.seq), op.timeout);
  offset = 0;
  for (const Tensor& tensor : list) {
    copyBytes(tensor.data(), flat + offset, tensor.nbytes());
    offset += tensor.nbytes();
  }
}

}  // namespace c10d::inline v1::gloo_ops
