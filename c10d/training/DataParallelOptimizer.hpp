#pragma once

/// \file
/// DataParallelOptimizer: a functional optimizer stepped on every rank after the reducer averaged
/// the gradients (Horovod's DistributedOptimizer).
///
/// Horovod's DistributedOptimizer on the reducer: the gradients are averaged across the ranks, then
/// every rank takes the same local step of a functional optimizer (c10d/training/Optimizers.hpp),
/// so the parameters stay identical everywhere.
///
/// \code
/// c10d::DistributedDataParallel ddp(*pg, parameters);
/// c10d::DataParallelOptimizer optimizer(ddp, c10d::OptimizerSpec::adam(1e-3));
/// ddp.syncParameters();
/// for (...) { forward(); backward(/* ddp.markGradReady(i) as gradients finish */);
/// \endcode
///               optimizer.step(); }     // finalizeBackward(), then the step on the averages
///
/// Errors: InvalidArgument for a bad spec (at construction) and, from step(), what
/// finalizeBackward throws (the step is then not taken) or what the optimizer refuses (parameters
/// that are not contiguous float32/float64 CPU tensors). Threading: as the reducer's
/// finalizeBackward: one thread, after the backward's marks.

#include <memory>

#include "c10d/training/DistributedDataParallel.hpp"
#include "c10d/training/Optimizers.hpp"

namespace c10d::inline v1 {

/// Steps a functional optimizer on every rank after a DistributedDataParallel reducer averaged the
/// gradients, so the parameters stay identical everywhere. Used from one thread, after the
/// backward's marks, as the reducer's finalizeBackward.
class DataParallelOptimizer {
 public:
  /// Makes the optimizer (makeOptimizer(spec)); no collective.
  /// reducer must outlive the optimizer.
  /// \param reducer The reducer whose registered parameters and gradients the optimizer steps.
  /// \param spec Which optimizer and its options.
  /// \throws InvalidArgument for an unknown optimizer or option, or an option out of range.
  DataParallelOptimizer(DistributedDataParallel& reducer, const OptimizerSpec& spec);

  /// Finishes the backward (reducer.finalizeBackward()) and steps every parameter with its
  /// averaged gradient. Inside a NoSync scope only the backward is finished: gradients accumulate
  /// and no step is taken (returns false); true when it stepped.
  /// \return true when the parameters were stepped; false for a no-sync backward.
  /// \throws InvalidArgument or the group's errors, as finalizeBackward (no step is then taken),
  /// and InvalidArgument from the optimizer for parameters that are not contiguous
  /// float32/float64 CPU tensors.
  bool step();

  /// Adds the training state to a checkpoint: the reducer's parameters whole as "<prefix><name>"
  /// and each one's optimizer state, whole, as "<prefix>optim.<name>.<buffer>" and
  /// "<prefix>optim.<name>.step": ZeroOptimizer::addToState's names, so a checkpoint of either
  /// loads into the other at any world size. Every rank holds all of it: a save writes each
  /// tensor once, spread over the ranks.
  /// \param state The checkpoint state to add to; it refers to the parameters and to the
  /// optimizer's state, so this object must outlive its saves and loads.
  /// \param prefix Prepended to every name added.
  void addToState(checkpoint::State& state, const std::string& prefix = "");

 private:
  DistributedDataParallel& reducer_;
  std::unique_ptr<FunctionalOptimizer> optimizer_;
};

}  // namespace c10d::inline v1
