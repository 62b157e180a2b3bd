// broadcast from a root: the mesh (binomial, scatter-allgather or pipelined, CostModel.hpp);
// past one message (256 KiB) over sockets where it would take the binomial tree, gloo::broadcast,
// whose one large transfer beat that tree's 256 KiB pieces (docs/performance.md).

#include <gloo/broadcast.h>

#include "backends/gloo/ops/Collectives.hpp"

namespace c10d::inline v1::gloo_ops {

void broadcast(Runtime& runtime, const Op& op, const OpTensors& tensors) {
  const Tensor& tensor = *tensors.input;
  if (tensor.nbytes() == 0 || runtime.size == 1) return;
  const size_t limit = runtime.fast && runtime.fast->broadcastsPastOneMessage(tensor.nbytes())
                           ? SIZE_MAX
                           : SyncMesh::kMaxMessageBytes;
  if (MeshAlgorithms* fast = runtime.fastPath(tensor.nbytes(), limit)) {
    fast->broadcast(tensor.data(), tensor.nbytes(), op.root);
    return;
  }
  const auto tag = static_cast<uint32_t>(op.seq);
  gloo::BroadcastOptions gloo(runtime.context());
  gloo.setOutput<uint8_t>(bytesOf(tensor), tensor.nbytes());
  gloo.setRoot(op.root);
  gloo.setTag(tag);
  gloo.setTimeout(op.timeout);
  runtime.agree(tag, op.timeout);
  gloo::broadcast(gloo);
}

}  // namespace c10d::inline v1::gloo_ops
