#pragma once

// Functional optimizers: the update rules of torch.optim (SGD, Adam, AdamW, Adagrad, RMSprop)
// applied in place to parameter tensors, with the gradients passed in rather than read from the
// tensors. DataParallelOptimizer steps one on every rank after the gradients are averaged;
// rpc::DistributedOptimizer runs one on each parameter owner.
//
//   auto sgd = makeOptimizer(OptimizerSpec::sgd(0.1, /*momentum=*/0.9));
//   sgd->step({weights, bias}, {weightsGrad, biasGrad});
//
// Errors: an unknown optimizer or option, or an option out of range, throws InvalidArgument
// naming it (makeOptimizer); step() throws InvalidArgument for parameters that are not
// contiguous float32/float64 CPU tensors or whose gradient differs in dtype or size.
//
// Threading: one optimizer is not safe to step from two threads at once.

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
  std::map<std::string, double> options;

  static OptimizerSpec sgd(double lr, double momentum = 0, double dampening = 0,
                           double weightDecay = 0, bool nesterov = false);
  static OptimizerSpec adam(double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
                            double eps = 1e-8, double weightDecay = 0);
  static OptimizerSpec adamw(double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
                             double eps = 1e-8, double weightDecay = 1e-2);
  static OptimizerSpec adagrad(double lr = 1e-2, double lrDecay = 0, double weightDecay = 0,
                               double initialAccumulatorValue = 0, double eps = 1e-10);
  static OptimizerSpec rmsprop(double lr = 1e-2, double alpha = 0.99, double eps = 1e-8,
                               double weightDecay = 0, double momentum = 0, bool centered = false);
};

/// One parameter's optimizer state, as torch.optim keeps it: the steps taken and the buffers
/// (momentum, moments...), each shaped like the parameter, named by stateNames().
struct OptimizerState {
  int64_t step = 0;
  std::vector<Tensor> buffers;
};

class FunctionalOptimizer {
 public:
  virtual ~FunctionalOptimizer() = default;
  /// Updates params[i] in place from grads[i]; an undefined gradient leaves its parameter (and
  /// its state) alone, as torch.optim skips parameters without a grad. State is kept per index:
  /// pass the same parameters in the same order every step.
  virtual void step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) = 0;
  /// Bytes of state (momentum, moments...) the optimizer holds now; 0 for one that does not say.
  virtual size_t stateBytes() const { return 0; }

  /// torch.optim's names of the buffers each parameter's state holds ("exp_avg", "exp_avg_sq"
  /// for Adam; "momentum_buffer" for SGD with momentum); empty for none.
  virtual std::vector<std::string> stateNames() const { return {}; }
  /// Parameter index's state, made (zero steps, zero buffers shaped like param) if it has none
  /// yet, so that a checkpoint's load can fill it before the first step. The state lives as long
  /// as the optimizer. Null for an optimizer that does not expose its state (the default).
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
void addOptimizerState(checkpoint::State& state, FunctionalOptimizer& optimizer, size_t index,
                       const Tensor& param, const std::string& name,
                       const std::vector<int64_t>& globalShape, const checkpoint::Slice& where,
                       int64_t offset = 0);

std::unique_ptr<FunctionalOptimizer> makeOptimizer(const OptimizerSpec& spec);

}  // namespace c10d::inline v1
