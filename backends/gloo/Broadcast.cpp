// broadcast from a root: the SyncMesh's binomial tree up to one message (256 KiB); beyond,
// gloo::broadcast, whose one large transfer beat our 256 KiB pieces (docs/performance.md).

#include <gloo/broadcast.h>

#include "backends/gloo/GlooRuntime.hpp"

namespace c10d::inline v0 {

std::shared_ptr<Work> GlooBackend::broadcast(const Tensor& tensor,
                                             const BroadcastOptions& options) {
  checkCPU(tensor, "broadcast");
  std::shared_ptr<Runtime> runtime = runtime_;
  return enqueue(
      WireCall::of("broadcast", tensor.dtype(), tensor.numel(), ReduceOp::SUM, options.rootRank),
      [=] { return detail::concat(tensor.describe(), " root ", options.rootRank); },
      options.timeout, {tensor},
      [runtime, tensor, options](uint32_t tag) {
        if (tensor.nbytes() == 0 || runtime->size == 1) return;
        if (SyncMesh* fast =
                runtime->fastPath(options.timeout, tensor.nbytes(), SyncMesh::kMaxMessageBytes)) {
          fast->broadcast(tensor.data(), tensor.nbytes(), options.rootRank);
          return;
        }
        gloo::BroadcastOptions gloo(runtime->context);
        gloo.setOutput<uint8_t>(bytesOf(tensor), tensor.nbytes());
        gloo.setRoot(options.rootRank);
        gloo.setTag(tag);
        gloo.setTimeout(options.timeout);
        runtime->agree(tag, options.timeout);
        gloo::broadcast(gloo);
      });
}

}  // namespace c10d::inline v0
