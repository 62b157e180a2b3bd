// barrier over gloo::barrier.

#include <gloo/barrier.h>

#include "backends/gloo/GlooRuntime.hpp"

namespace c10d::inline v0 {

std::shared_ptr<Work> GlooBackend::barrier(const BarrierOptions& options) {
  std::shared_ptr<Runtime> runtime = runtime_;
  return enqueue(
      WireCall::of("barrier", ScalarType::UInt8, 0), [] { return std::string(); }, options.timeout,
      {},
      [runtime, options](uint32_t tag) {
        if (runtime->size == 1) return;
        if (SyncMesh* fast = runtime->fastPath(options.timeout, 0)) {
          fast->barrier();
          return;
        }
        gloo::BarrierOptions gloo(runtime->context);
        gloo.setTag(tag);
        gloo.setTimeout(options.timeout);
        runtime->agree(tag, options.timeout);
        gloo::barrier(gloo);
      });
}

}  // namespace c10d::inline v0
