// reduce_scatter (list in) and reduce_scatter_tensor (flat in): on the SyncMesh (a ring, or
// layered across hosts). Gloo 0.5 has none over unbound buffers, so with a per-op timeout we
// allreduce a copy of the whole input there and keep our block (twice the bytes).

#include <cstring>

#include "backends/common/Reduce.hpp"
#include "backends/gloo/GlooRuntime.hpp"

#include <gloo/allreduce.h>

namespace c10d::inline v0 {
namespace {

void reduceScatterFlat(GlooBackend::Runtime& runtime, std::vector<uint8_t>& flat,
                       const Tensor& output, const ReduceOp& op, uint32_t tag,
                       std::chrono::milliseconds timeout) {
  ScalarType dtype = output.dtype();
  size_t count = static_cast<size_t>(output.numel()) * runtime.size;
  prepareReduce(op, dtype, flat.data(), count);
  if (SyncMesh* fast = runtime.fastPath(timeout, flat.size()); fast != nullptr && count > 0) {
    fast->reduceScatter(flat.data(), output.numel(), elementSize(dtype), reduceFunction(op, dtype));
  } else if (count > 0 && runtime.size > 1) {
    gloo::AllreduceOptions options(runtime.context);
    withWordOfSize(elementSize(dtype), [&]<typename W>() {
      options.setOutput<W>(reinterpret_cast<W*>(flat.data()), count);
    });
    options.setReduceFunction(reduceFunction(op, dtype));
    options.setTag(tag);
    options.setTimeout(timeout);
    runtime.agree(tag, timeout);
    gloo::allreduce(options);
  }
  copyBytes(output.data(), flat.data() + runtime.rank * output.nbytes(), output.nbytes());
  finishReduce(op, dtype, output.data(), output.numel(), runtime.size);
}

}  // namespace

std::shared_ptr<Work> GlooBackend::reduceScatter(const Tensor& output,
                                                 const std::vector<Tensor>& inputs,
                                                 const ReduceScatterOptions& options) {
  checkCPU(output, "reduce_scatter");
  std::shared_ptr<Runtime> runtime = runtime_;
  return enqueue(
      WireCall::of("reduce_scatter", output.dtype(), output.numel(), options.reduceOp.kind()),
      [=] { return detail::concat(output.describe(), " ", options.reduceOp); }, options.timeout,
      {output},
      [runtime, output, inputs, options](uint32_t tag) {
        std::vector<uint8_t> flat(output.nbytes() * inputs.size());
        for (size_t r = 0; r < inputs.size(); ++r) {
          copyBytes(flat.data() + r * output.nbytes(), inputs[r].data(), output.nbytes());
        }
        reduceScatterFlat(*runtime, flat, output, options.reduceOp, tag, options.timeout);
      });
}

std::shared_ptr<Work> GlooBackend::reduceScatterTensor(const Tensor& output, const Tensor& input,
                                                       const ReduceScatterOptions& options) {
  checkCPU(output, "reduce_scatter_tensor");
  std::shared_ptr<Runtime> runtime = runtime_;
  return enqueue(
      WireCall::of("reduce_scatter_tensor", output.dtype(), output.numel(),
                   options.reduceOp.kind()),
      [=] {
        return detail::concat(input.describe(), " -> ", output.describe(), " ", options.reduceOp);
      },
      options.timeout, {output},
      [runtime, output, input, options](uint32_t tag) {
        const auto* begin = static_cast<const uint8_t*>(input.data());
        std::vector<uint8_t> flat(begin, begin + input.nbytes());
        reduceScatterFlat(*runtime, flat, output, options.reduceOp, tag, options.timeout);
      });
}

}  // namespace c10d::inline v0
