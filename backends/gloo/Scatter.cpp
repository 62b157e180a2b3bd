// scatter from a root over gloo::scatter.

#include <gloo/scatter.h>

#include <cstring>

#include "backends/gloo/GlooRuntime.hpp"

namespace c10d::inline v0 {

std::shared_ptr<Work> GlooBackend::scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                           const ScatterOptions& options) {
  checkCPU(output, "scatter");
  std::shared_ptr<Runtime> runtime = runtime_;
  return enqueue(
      WireCall::of("scatter", output.dtype(), output.numel(), ReduceOp::SUM, options.rootRank),
      [=] { return detail::concat(output.describe(), " root ", options.rootRank); },
      options.timeout, {output},
      [runtime, output, inputs, options](uint32_t tag) {
        size_t bytes = output.nbytes();
        if (runtime->size == 1 || bytes == 0) {
          if (!inputs.empty()) copyBytes(output.data(), inputs[0].data(), bytes);
          return;
        }
        gloo::ScatterOptions gloo(runtime->context);
        if (runtime->rank == options.rootRank) {
          std::vector<uint8_t*> pointers;
          for (const Tensor& input : inputs) pointers.push_back(bytesOf(input));
          gloo.setInputs<uint8_t>(pointers, bytes);
        }
        gloo.setOutput<uint8_t>(bytesOf(output), bytes);
        gloo.setRoot(options.rootRank);
        gloo.setTag(tag);
        gloo.setTimeout(options.timeout);
        runtime->agree(tag, options.timeout);
        gloo::scatter(gloo);
      });
}

}  // namespace c10d::inline v0
