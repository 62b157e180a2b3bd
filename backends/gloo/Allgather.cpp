// allgather (list out) and allgather_into_tensor (flat out) over gloo::allgather.

#include <gloo/allgather.h>

#include <cstring>

#include "backends/gloo/GlooRuntime.hpp"

namespace c10d::inline v0 {
namespace {

// Gathers input from every rank into flat (size * input bytes), rank r's at offset r.
void allgatherFlat(GlooBackend::Runtime& runtime, const Tensor& input, uint8_t* flat, uint32_t tag,
                   std::chrono::milliseconds timeout) {
  size_t bytes = input.nbytes();
  if (runtime.size == 1 || bytes == 0) {
    copyBytes(flat, input.data(), bytes);
    return;
  }
  if (SyncMesh* fast = runtime.fastPath(timeout, bytes * runtime.size)) {
    copyBytes(flat + runtime.rank * bytes, input.data(), bytes);
    fast->allgather(flat, bytes);
    return;
  }
  gloo::AllgatherOptions options(runtime.context);
  options.setInput<uint8_t>(bytesOf(input), bytes);
  options.setOutput<uint8_t>(flat, bytes * runtime.size);
  options.setTag(tag);
  options.setTimeout(timeout);
  runtime.agree(tag, timeout);
  gloo::allgather(options);
}

}  // namespace

std::shared_ptr<Work> GlooBackend::allgather(const std::vector<Tensor>& outputs,
                                             const Tensor& input, const AllgatherOptions& options) {
  checkCPU(input, "allgather");
  std::shared_ptr<Runtime> runtime = runtime_;
  return enqueue(
      WireCall::of("allgather", input.dtype(), input.numel()), [=] { return input.describe(); },
      options.timeout, outputs,
      [runtime, outputs, input, options](uint32_t tag) {
        std::vector<uint8_t> flat(input.nbytes() * runtime->size);
        allgatherFlat(*runtime, input, flat.data(), tag, options.timeout);
        for (size_t r = 0; r < outputs.size(); ++r) {
          copyBytes(outputs[r].data(), flat.data() + r * input.nbytes(), input.nbytes());
        }
      });
}

std::shared_ptr<Work> GlooBackend::allgatherIntoTensor(const Tensor& output, const Tensor& input,
                                                       const AllgatherOptions& options) {
  checkCPU(input, "allgather_into_tensor");
  std::shared_ptr<Runtime> runtime = runtime_;
  return enqueue(
      WireCall::of("allgather_into_tensor", input.dtype(), input.numel()),
      [=] { return input.describe(); }, options.timeout, {output},
      [runtime, output, input, options](uint32_t tag) {
        allgatherFlat(*runtime, input, bytesOf(output), tag, options.timeout);
      });
}

}  // namespace c10d::inline v0
