#pragma once

/// \file
/// Functional optimizers (torch.optim's SGD, Adam, AdamW, Adagrad, RMSprop) stepping parameter
/// tensors in place from gradients passed in; their specs, state and checkpointing.
///
/// Functional optimizers: the update rules of torch.optim (SGD, Adam, AdamW, Adagrad, RMSprop)
/// applied in place to parameter tensors, with the gradients passed in rather than read from the
/// tensors. DataParallelOptimizer steps one on every rank after the gradients are averaged;
/// rpc::DistributedOptimizer runs one on each parameter owner.
///
/// \code
/// auto sgd = makeOptimizer(OptimizerSpec::sgd(0.1, /*momentum=*/0.9));
/// sgd->step({weights, bias}, {weightsGrad, biasGrad});
/// \endcode
///
/// Errors: an unknown optimizer or option, or an option out of range, throws InvalidArgument
/// naming it (makeOptimizer); step() throws InvalidArgument for parameters that are not
/// contiguous float32/float64 CPU tensors or whose gradient differs in dtype or size.
///
/// Threading: one optimizer is not safe to step from two threads at once.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

/// Which optimizer and its options, by torch.optim's names (lr, momentum, dampening,
/// weight_decay, nesterov, beta1, beta2, eps, lr_decay, initial_accumulator_value, alpha,
/// centered; booleans as 0/1). Travels over RPC (rpc/autograd/DistributedOptimizer.hpp).
struct OptimizerSpec {
  std::string name;  ///< "sgd", "adam", "adamw", "adagrad", "rmsprop"
  /// Option name to value; options left out take the optimizer's defaults (the factories'
  /// defaults below); SGD needs "lr".
  std::map<std::string, double> options;

  /// SGD with momentum, dampening, L2 weight decay and Nesterov momentum, as torch.optim.SGD.
  /// makeOptimizer checks the values.
  /// \param lr Learning rate; >= 0.
  /// \param momentum Momentum factor; >= 0 (0: no momentum buffer).
  /// \param dampening Dampening of the momentum.
  /// \param weightDecay L2 penalty added to the gradient; >= 0.
  /// \param nesterov Nesterov momentum; needs momentum > 0 and dampening 0.
  /// \return The spec, named "sgd", with every option set.
  static OptimizerSpec sgd(double lr, double momentum = 0, double dampening = 0,
                           double weightDecay = 0, bool nesterov = false);
  /// Adam, as torch.optim.Adam (weight decay added to the gradient).
  /// \param lr Learning rate; >= 0.
  /// \param beta1 Decay of the first moment; in [0, 1).
  /// \param beta2 Decay of the second moment; in [0, 1).
  /// \param eps Added to the denominator; >= 0.
  /// \param weightDecay L2 penalty added to the gradient; >= 0.
  /// \return The spec, named "adam", with every option set.
  static OptimizerSpec adam(double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
                            double eps = 1e-8, double weightDecay = 0);
  /// AdamW, as torch.optim.AdamW (decoupled weight decay: each step first scales the parameter
  /// by 1 - lr * weightDecay).
  /// \param lr Learning rate; >= 0.
  /// \param beta1 Decay of the first moment; in [0, 1).
  /// \param beta2 Decay of the second moment; in [0, 1).
  /// \param eps Added to the denominator; >= 0.
  /// \param weightDecay Decoupled weight decay; >= 0.
  /// \return The spec, named "adamw", with every option set.
  static OptimizerSpec adamw(double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
                             double eps = 1e-8, double weightDecay = 1e-2);
  /// Adagrad, as torch.optim.Adagrad.
  /// \param lr Learning rate; >= 0.
  /// \param lrDecay Learning-rate decay: step t uses lr / (1 + (t - 1) lrDecay); >= 0.
  /// \param weightDecay L2 penalty added to the gradient; >= 0.
  /// \param initialAccumulatorValue Starting value of the sum of squares; >= 0.
  /// \param eps Added to the denominator; >= 0.
  /// \return The spec, named "adagrad", with every option set.
  static OptimizerSpec adagrad(double lr = 1e-2, double lrDecay = 0, double weightDecay = 0,
                               double initialAccumulatorValue = 0, double eps = 1e-10);
  /// RMSprop, as torch.optim.RMSprop.
  /// \param lr Learning rate; >= 0.
  /// \param alpha Smoothing constant of the squared-gradient average; >= 0.
  /// \param eps Added to the denominator; >= 0.
  /// \param weightDecay L2 penalty added to the gradient; >= 0.
  /// \param momentum Momentum factor; >= 0.
  /// \param centered Normalise by the gradient's estimated variance instead of its second
  /// moment.
  /// \return The spec, named "rmsprop", with every option set.
  static OptimizerSpec rmsprop(double lr = 1e-2, double alpha = 0.99, double eps = 1e-8,
                               double weightDecay = 0, double momentum = 0, bool centered = false);
};

/// One parameter's optimizer state, as torch.optim keeps it: the steps taken and the buffers
/// (momentum, moments...), each shaped like the parameter, named by stateNames().
struct OptimizerState {
  int64_t step = 0;             ///< steps taken with a gradient
  std::vector<Tensor> buffers;  ///< one per stateNames() entry, in that order
};

/// An optimizer's update rule, applied in place to parameters with the gradients passed in
/// (makeOptimizer makes the library's). Not safe to step from two threads at once.
class FunctionalOptimizer {
 public:
  virtual ~FunctionalOptimizer() = default;
  /// Updates params[i] in place from grads[i]; an undefined gradient leaves its parameter (and
  /// its state) alone, as torch.optim skips parameters without a grad. State is kept per index:
  /// pass the same parameters in the same order every step.
  /// \param params The parameters, updated in place.
  /// \param grads Their gradients, one per parameter (undefined to skip it).
  /// \throws InvalidArgument (the library's optimizers) for a count mismatch, a parameter that
  /// is not a contiguous float32/float64 CPU tensor, or a gradient that differs from it in
  /// dtype or size (or is not contiguous on the CPU).
  virtual void step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) = 0;
  /// Bytes of state (momentum, moments...) the optimizer holds now; 0 for one that does not say.
  /// \return That byte count.
  virtual size_t stateBytes() const { return 0; }

  /// torch.optim's names of the buffers each parameter's state holds ("exp_avg", "exp_avg_sq"
  /// for Adam; "momentum_buffer" for SGD with momentum); empty for none.
  /// \return The names, in the order of OptimizerState::buffers.
  virtual std::vector<std::string> stateNames() const { return {}; }
  /// Parameter index's state, made (zero steps, zero buffers shaped like param) if it has none
  /// yet, so that a checkpoint's load can fill it before the first step. The state lives as long
  /// as the optimizer. Null for an optimizer that does not expose its state (the default).
  /// \param index The parameter's index in step()'s lists.
  /// \param param The parameter, whose shape and dtype new buffers take.
  /// \return The state (owned by the optimizer), or null.
  /// \throws InvalidArgument (the library's optimizers) when param's shape or dtype differs
  /// from the state's buffers made earlier.
  virtual OptimizerState* stateOf(size_t index, const Tensor& param) {
    (void)index;
    (void)param;
    return nullptr;
  }
};

namespace checkpoint {
class State;
struct Slice;
}  // namespace checkpoint

/// Adds parameter index's optimizer state to state, as slice where of global tensors shaped
/// globalShape: each buffer as "<name>.<buffer name>" and the step count as "<name>.step" (an
/// int64 scalar), which the load turns back into the optimizer's count. param is this rank's part
/// of the parameter (what the optimizer steps). Throws InvalidArgument for an optimizer that does
/// not expose its state.
/// The state then refers to the optimizer's state for index: the optimizer must outlive its
/// saves and loads.
/// \param state The checkpoint state to add to.
/// \param optimizer The optimizer whose state is added (made by stateOf if it has none yet).
/// \param index The parameter's index in the optimizer's step() lists.
/// \param param This rank's part of the parameter.
/// \param name The checkpoint name the buffer names and ".step" are appended to.
/// \param globalShape The whole parameter's shape.
/// \param where The slice of the global tensor this rank's buffers hold.
/// \param offset Where the slice starts in the state's buffers, in elements (a shard's buffers
/// may hold several slices one after another); where.numel() elements are added from there.
/// \throws InvalidArgument for an optimizer that does not expose its state.
void addOptimizerState(checkpoint::State& state, FunctionalOptimizer& optimizer, size_t index,
                       const Tensor& param, const std::string& name,
                       const std::vector<int64_t>& globalShape, const checkpoint::Slice& where,
                       int64_t offset = 0);

/// Makes the optimizer spec names, with spec's options over the defaults (OptimizerSpec's
/// factories').
/// \param spec The optimizer's name and options.
/// \return The optimizer, with no state yet.
/// \throws InvalidArgument naming it for an unknown optimizer or option, an option that is not
/// finite or out of range, SGD without "lr", or nesterov without momentum > 0 and dampening 0.
std::unique_ptr<FunctionalOptimizer> makeOptimizer(const OptimizerSpec& spec);

}  // namespace c10d::inline v1
