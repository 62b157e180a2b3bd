// allreduce and allreduce_coalesced over gloo::allreduce, with our reduce functions so every
// dtype (bfloat16 included) and every ReduceOp works.

#include <gloo/allreduce.h>

#include <cstring>

#include "backends/common/Reduce.hpp"
#include "backends/gloo/GlooRuntime.hpp"

namespace c10d::inline v0 {
namespace {

void allreduceInPlace(GlooBackend::Runtime& runtime, void* data, ScalarType dtype, size_t count,
                      const ReduceOp& op, uint32_t tag, std::chrono::milliseconds timeout) {
  prepareReduce(op, dtype, data, count);
  if (SyncMesh* fast = runtime.fastPath(timeout, count * elementSize(dtype));
      fast != nullptr && count > 0) {
    fast->allreduce(data, count, elementSize(dtype), reduceFunction(op, dtype));
  } else if (count > 0 && runtime.size > 1) {
    gloo::AllreduceOptions options(runtime.context);
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

std::shared_ptr<Work> GlooBackend::allreduce(const Tensor& tensor,
                                             const AllreduceOptions& options) {
  checkCPU(tensor, "allreduce");
  std::shared_ptr<Runtime> runtime = runtime_;
  return enqueue(
      WireCall::of("allreduce", tensor.dtype(), tensor.numel(), options.reduceOp.kind()),
      [=] { return detail::concat(tensor.describe(), " ", options.reduceOp); }, options.timeout,
      {tensor},
      [runtime, tensor, options](uint32_t tag) {
        allreduceInPlace(*runtime, tensor.data(), tensor.dtype(), tensor.numel(), options.reduceOp,
                         tag, options.timeout);
      });
}

std::shared_ptr<Work> GlooBackend::allreduceCoalesced(const std::vector<Tensor>& tensors,
                                                      const AllreduceOptions& options) {
  for (const Tensor& tensor : tensors) checkCPU(tensor, "allreduce_coalesced");
  std::shared_ptr<Runtime> runtime = runtime_;
  size_t total = 0;
  for (const Tensor& tensor : tensors) total += tensor.numel();
  // One flat buffer, one allreduce: many small tensors cost one round of latency.
  return enqueue(
      WireCall::of("allreduce_coalesced", tensors[0].dtype(), total, options.reduceOp.kind()),
      [=] {
        return detail::concat(tensors.size(), " tensors, ", total, " ", tensors[0].dtype(), " ",
                              options.reduceOp);
      },
      options.timeout, tensors,
      [runtime, tensors, total, options](uint32_t tag) {
        ScalarType dtype = tensors[0].dtype();
        size_t elementBytes = elementSize(dtype);
        std::vector<uint8_t> flat(total * elementBytes);
        size_t offset = 0;
        for (const Tensor& tensor : tensors) {
          copyBytes(flat.data() + offset, tensor.data(), tensor.nbytes());
          offset += tensor.nbytes();
        }
        allreduceInPlace(*runtime, flat.data(), dtype, total, options.reduceOp, tag,
                         options.timeout);
        offset = 0;
        for (const Tensor& tensor : tensors) {
          copyBytes(tensor.data(), flat.data() + offset, tensor.nbytes());
          offset += tensor.nbytes();
        }
      });
}

}  // namespace c10d::inline v0
