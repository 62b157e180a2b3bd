#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/checkpoint/State.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

/// One stage of a pipeline: what this rank computes for a micro-batch. The runner moves tensors
/// between stages; the stage keeps whatever its backward needs (activations) itself, by micro-batch.
struct PipelineStage {
  /// The first stage gets input(micro) from the runner's caller (run's argument); the others the
  /// previous stage's output. Returns this stage's output (the last stage's is its loss, or any
  /// tensor the caller wants back).
  std::function<Tensor(int micro, const Tensor& input)> forward;
  /// Gets the gradient of this stage's output (undefined on the last stage, which starts the
  /// backward from its loss) and returns the gradient of its input (ignored on the first stage).
  std::function<Tensor(int micro, const Tensor& outputGrad)> backward;
  /// The parameters this stage holds, by their names in the whole model ("layers.5.weight"), for
  /// checkpoints (PipelineRunner::addToState). Optional.
  std::vector<std::pair<std::string, Tensor>> parameters{};
};

enum class PipelineSchedule {
  GPipe,     ///< every forward, then every backward: m activations in flight per stage
  OneFOneB,  ///< warm-up forwards, then alternate forward and backward: at most p in flight
};

struct PipelineOptions {
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int microBatches = 1;
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< of each transfer
};

/// What one step did on this rank.
struct PipelineStepStats {
  std::vector<Tensor> outputs;  ///< the last stage's forward outputs, by micro-batch (else empty)
  std::chrono::duration<double> total{0};    ///< the step, on this rank
  std::chrono::duration<double> compute{0};  ///< inside forward and backward
  /// Idle share of this rank's step: what the schedule's bubble (and the transfers) cost.
  double idleFraction() const { return total.count() > 0 ? 1 - compute / total : 0; }
};

/// Runs pipeline-parallel steps: stage s is rank s of group (consecutive stages are consecutive
/// ranks), micro-batches flow forward from stage 0 and gradients back from the last stage, over
/// point-to-point operations of the group (each transfer's sends batched: batchIsendIrecv). Tensors
/// of any shape and dtype travel: each carries a small header (dtype, shape) first, so stages need
/// not agree on shapes in advance.
///
/// Every rank of group calls step() with the same options; the first stage passes input, the
/// others ignore it. Errors: InvalidArgument for options that do not fit (no micro-batches, a
/// group of one stage with missing functions), the group's errors (a stage that fails or never
/// answers is a TimeoutError or BackendError naming the peer).
class PipelineRunner {
 public:
  PipelineRunner(ProcessGroup& group, PipelineStage stage, PipelineOptions options);

  PipelineStepStats step(const std::function<Tensor(int micro)>& input = nullptr);

  /// Adds the stage's parameters, whole, to a checkpoint as "<prefix><name>". Names are the whole
  /// model's, so a checkpoint saved with one number of stages loads with another: each stage asks
  /// for the layers it holds then.
  void addToState(checkpoint::State& state, const std::string& prefix = "") const;

  /// The idle fraction of a perfectly balanced pipeline, (p - 1) / (m + p - 1): what the schedule
  /// costs in theory, for comparison with the measured one.
  static double theoreticalBubble(int stages, int microBatches);

  /// The order this rank runs its passes in: (micro, true) for a forward, (micro, false) for a
  /// backward. Public for tests and for printing the schedule.
  static std::vector<std::pair<int, bool>> order(PipelineSchedule schedule, int stage, int stages,
                                                 int microBatches);

 private:
  void send(const Tensor& tensor, int peer, int tag, std::vector<std::shared_ptr<Work>>& pending);
  Tensor receive(int peer, int tag);

  ProcessGroup& group_;
  PipelineStage stage_;
  PipelineOptions options_;
};

}  // namespace c10d::inline v1
