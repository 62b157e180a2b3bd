#pragma once

/// \file
/// PipelineRunner: pipeline-parallel steps over a group's ranks, with GPipe and 1F1B schedules.

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
/// between stages; the stage keeps whatever its backward needs (activations) itself, by
/// micro-batch.
struct PipelineStage {
  /// The first stage gets input(micro) from the runner's caller (step()'s argument); the others the
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

/// The order in which each stage runs its micro-batches' forward and backward passes
/// (p stages, m micro-batches).
enum class PipelineSchedule {
  GPipe,     ///< every forward, then every backward: m activations in flight per stage
  OneFOneB,  ///< warm-up forwards, then alternate forward and backward: at most p in flight
};

/// How a PipelineRunner runs each step; the same on every rank of the group.
struct PipelineOptions {
  /// the order of the passes
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int microBatches = 1;  ///< micro-batches per step (m), at least 1
  /// of each transfer; kDefaultTimeout: the group's
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

/// What one step did on this rank.
struct PipelineStepStats {
  std::vector<Tensor> outputs;  ///< the last stage's forward outputs, by micro-batch (else empty)
  std::chrono::duration<double> total{0};    ///< the step, on this rank
  std::chrono::duration<double> compute{0};  ///< inside forward and backward
  /// Idle share of this rank's step: what the schedule's bubble (and the transfers) cost.
  /// \return 1 - compute / total, in [0, 1]; 0 when total is zero.
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
/// stage without its forward or backward, a first stage given no input), the group's errors (a
/// stage that fails or never answers is a TimeoutError or BackendError naming the peer).
class PipelineRunner {
 public:
  /// Runs stage as rank group.rank()'s stage of group.
  /// \param group the pipeline's ranks, stage s at rank s; must outlive the runner.
  /// \param stage this rank's stage: forward and backward are required.
  /// \param options the same on every rank.
  /// \throws InvalidArgument for microBatches below 1 or a stage without forward or backward.
  PipelineRunner(ProcessGroup& group, PipelineStage stage, PipelineOptions options);

  /// Runs one step: every micro-batch forward and backward on this stage, in the schedule's
  /// order, receiving from and sending to the neighbouring stages. Collective over group.
  /// \param input the first stage's input for micro-batch micro (0 to microBatches - 1);
  ///        required on the first stage, ignored (may be empty) on the others.
  /// \return What the step did on this rank.
  /// \throws InvalidArgument when the first stage has no input, or a stage hands on an
  ///         undefined or non-contiguous tensor or one of more than 8 dimensions; BackendError for
  ///         a malformed transfer; TimeoutError or BackendError from the transfers; what forward
  ///         and backward throw.
  PipelineStepStats step(const std::function<Tensor(int micro)>& input = nullptr);

  /// Adds the stage's parameters, whole, to a checkpoint as "<prefix><name>". Names are the whole
  /// model's, so a checkpoint saved with one number of stages loads with another: each stage asks
  /// for the layers it holds then.
  /// \param state the checkpoint state to add to; it refers to the parameters' tensors.
  /// \param prefix put before every name; empty for none.
  /// \throws InvalidArgument as checkpoint::State::add does (an undefined or non-contiguous
  ///         parameter, a name given twice).
  void addToState(checkpoint::State& state, const std::string& prefix = "") const;

  /// The idle fraction of a perfectly balanced pipeline, (p - 1) / (m + p - 1): what the schedule
  /// costs in theory, for comparison with the measured one.
  /// \param stages the pipeline's stages (p), at least 1.
  /// \param microBatches micro-batches per step (m), at least 1.
  /// \return (p - 1) / (m + p - 1).
  static double theoreticalBubble(int stages, int microBatches);

  /// The order this rank runs its passes in: (micro, true) for a forward, (micro, false) for a
  /// backward. Public for tests and for printing the schedule.
  /// \param schedule the schedule.
  /// \param stage this stage, in [0, stages).
  /// \param stages the pipeline's stages (p).
  /// \param microBatches micro-batches per step (m).
  /// \return Every micro-batch's forward and backward, 2 m passes, in the order this stage runs
  ///         them.
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
