#pragma once

// Private to backends/gloo: a collective's Work, and the function that runs each collective on
// the thread that claims it (one file per collective: Allreduce.cpp, Broadcast.cpp, ...). Each
// gets the op and its tensors as ProcessGroup validated them (c10d/Backend.hpp's OpTensors) and
// runs under Runtime::guarded, with this rank's call set on the wire (Runtime::beginCall).

#include "backends/common/OpQueue.hpp"
#include "backends/gloo/GlooRuntime.hpp"

namespace c10d::inline v1 {

namespace gloo_ops {

using Runtime = GlooBackend::Runtime;

void broadcast(Runtime& runtime, const Op& op, const OpTensors& tensors);
void allreduce(Runtime& runtime, const Op& op, const OpTensors& tensors);
void allreduceCoalesced(Runtime& runtime, const Op& op, const OpTensors& tensors);
void reduce(Runtime& runtime, const Op& op, const OpTensors& tensors);
void allgather(Runtime& runtime, const Op& op, const OpTensors& tensors);
void allgatherIntoTensor(Runtime& runtime, const Op& op, const OpTensors& tensors);
void gather(Runtime& runtime, const Op& op, const OpTensors& tensors);
void scatter(Runtime& runtime, const Op& op, const OpTensors& tensors);
void reduceScatter(Runtime& runtime, const Op& op, const OpTensors& tensors);
void reduceScatterTensor(Runtime& runtime, const Op& op, const OpTensors& tensors);
void alltoall(Runtime& runtime, const Op& op, const OpTensors& tensors);
void alltoallBase(Runtime& runtime, const Op& op, const OpTensors& tensors);
void barrier(Runtime& runtime, const Op& op, const OpTensors& tensors);

}  // namespace gloo_ops

// A collective of the Gloo backend. The runtime outlives it while it can run: the backend's
// shutdown closes the queue (which fails what has not run) before the runtime stops.
// Pooled by the backend (c10d/WorkPool.hpp): made once, rebound to each op it runs.
class GlooWork final : public QueuedWork {
 public:
  GlooWork(std::shared_ptr<detail::GroupTrace> trace, GlooBackend::Runtime* runtime)
      : QueuedWork(std::move(trace)), runtime_(runtime) {}

 private:
  void run() override;
  GlooBackend::Runtime* runtime_;
};

}  // namespace c10d::inline v1
