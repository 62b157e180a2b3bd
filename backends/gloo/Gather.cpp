// gather to a root over gloo::gather.

#include <gloo/gather.h>

#include <cstring>

#include "backends/gloo/GlooRuntime.hpp"

namespace c10d::inline v0 {

std::shared_ptr<Work> GlooBackend::gather(const std::vector<Tensor>& outputs, const Tensor& input,
                                          const GatherOptions& options) {
  checkCPU(input, "gather");
  std::shared_ptr<Runtime> runtime = runtime_;
  return enqueue(
      WireCall::of("gather", input.dtype(), input.numel(), ReduceOp::SUM, options.rootRank),
      [=] { return detail::concat(input.describe(), " root ", options.rootRank); }, options.timeout,
      outputs,
      [runtime, outputs, input, options](uint32_t tag) {
        size_t bytes = input.nbytes();
        bool root = runtime->rank == options.rootRank;
        std::vector<uint8_t> flat(root ? bytes * runtime->size : 0);
        if (runtime->size == 1 || bytes == 0) {
          if (root) copyBytes(flat.data(), input.data(), bytes);
        } else {
          gloo::GatherOptions gloo(runtime->context);
          gloo.setInput<uint8_t>(bytesOf(input), bytes);
          if (root) gloo.setOutput<uint8_t>(flat.data(), flat.size());
          gloo.setRoot(options.rootRank);
          gloo.setTag(tag);
          gloo.setTimeout(options.timeout);
          runtime->agree(tag, options.timeout);
          gloo::gather(gloo);
        }
        for (size_t r = 0; r < outputs.size(); ++r) {
          copyBytes(outputs[r].data(), flat.data() + r * bytes, bytes);
        }
      });
}

}  // namespace c10d::inline v0
