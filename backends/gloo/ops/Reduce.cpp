// reduce to one root: the mesh's binomial tree (layered across hosts), else gloo::reduce.

#include <gloo/reduce.h>

#include "backends/common/Reduce.hpp"
#include "backends/gloo/ops/Collectives.hpp"

namespace c10d::inline v1::gloo_ops {

void reduce(Runtime& runtime, const Op& op, const OpTensors& tensors) {
  const Tensor& tensor = *tensors.input;
  const ScalarType dtype = tensor.dtype();
  const size_t count = tensor.numel();
  prepareReduce(op.reduceOp, dtype, tensor.data(), count);
  if (MeshAlgorithms* fast = runtime.fastPath(tensor.nbytes()); fast != nullptr && count > 0) {
    fast->reduce(tensor.data(), count, elementSize(dtype), reduceFunction(op.reduceOp, dtype),
                 op.root);
  } else if (count > 0 && runtime.size > 1) {
    const auto tag = static_cast<uint32_t>(op.seq);
    gloo::ReduceOptions gloo(runtime.context());
    withWordOfSize(elementSize(dtype), [&]<typename W>() {
      gloo.setInput<W>(static_cast<W*>(tensor.data()), count);
      gloo.setOutput<W>(static_cast<W*>(tensor.data()), count);
    });
    gloo.setRoot(op.root);
    gloo.setReduceFunction(reduceFunction(op.reduceOp, dtype));
    gloo.setTag(tag);
    gloo.setTimeout(op.timeout);
    runtime.agree(tag, op.timeout);
    gloo::reduce(gloo);
  }
  if (runtime.rank == op.root) {
    finishReduce(op.reduceOp, dtype, tensor.data(), count, runtime.size);
  }
}

}  // namespace c10d::inline v1::gloo_ops
