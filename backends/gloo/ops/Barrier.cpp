// barrier: the mesh's dissemination, else gloo::barrier.

#include <gloo/barrier.h>

#include "backends/gloo/ops/Collectives.hpp"

namespace c10d::inline v1::gloo_ops {

void barrier(Runtime& runtime, const Op& op, const OpTensors&) {
  if (runtime.size == 1) return;
  if (MeshAlgorithms* fast = runtime.fastPath(0)) {
    fast->barrier();
    return;
  }
  const auto tag = static_cast<uint32_t>(op.seq);
  gloo::BarrierOptions gloo(runtime.context());
  gloo.setTag(tag);
  gloo.setTimeout(op.timeout);
  runtime.agree(tag, op.timeout);
  gloo::barrier(gloo);
}

}  // namespace c10d::inline v1::gloo_ops
