// reduce to one root over gloo::reduce.

#include <gloo/reduce.h>

#include "backends/common/Reduce.hpp"
#include "backends/gloo/GlooRuntime.hpp"

namespace c10d::inline v0 {

std::shared_ptr<Work> GlooBackend::reduce(const Tensor& tensor, const ReduceOptions& options) {
  checkCPU(tensor, "reduce");
  std::shared_ptr<Runtime> runtime = runtime_;
  return enqueue(
      WireCall::of("reduce", tensor.dtype(), tensor.numel(), options.reduceOp.kind(),
                   options.rootRank),
      [=] {
        return detail::concat(tensor.describe(), " ", options.reduceOp, " root ", options.rootRank);
      },
      options.timeout, {tensor},
      [runtime, tensor, options](uint32_t tag) {
        ScalarType dtype = tensor.dtype();
        size_t count = tensor.numel();
        prepareReduce(options.reduceOp, dtype, tensor.data(), count);
        if (SyncMesh* fast = runtime->fastPath(options.timeout, tensor.nbytes());
            fast != nullptr && count > 0) {
          fast->reduce(tensor.data(), count, elementSize(dtype),
                       reduceFunction(options.reduceOp, dtype), options.rootRank);
        } else if (count > 0 && runtime->size > 1) {
          gloo::ReduceOptions gloo(runtime->context);
          withWordOfSize(elementSize(dtype), [&]<typename W>() {
            gloo.setInput<W>(static_cast<W*>(tensor.data()), count);
            gloo.setOutput<W>(static_cast<W*>(tensor.data()), count);
          });
          gloo.setRoot(options.rootRank);
          gloo.setReduceFunction(reduceFunction(options.reduceOp, dtype));
          gloo.setTag(tag);
          gloo.setTimeout(options.timeout);
          runtime->agree(tag, options.timeout);
          gloo::reduce(gloo);
        }
        if (runtime->rank == options.rootRank) {
          finishReduce(options.reduceOp, dtype, tensor.data(), count, runtime->size);
        }
      });
}

}  // namespace c10d::inline v0
