#include "c10d/training/DataParallelOptimizer.hpp"

#include <vector>

namespace c10d::inline v1 {

DataParallelOptimizer::DataParallelOptimizer(DistributedDataParallel& reducer,
                                             const OptimizerSpec& spec)
    : reducer_(reducer), optimizer_(makeOptimizer(spec)) {}

bool DataParallelOptimizer::step() {
  const bool synchronised = reducer_.finalizeBackward();
  if (!synchronised) return false;
  std::vector<Tensor> parameters, gradients;
  for (size_t i = 0; i < reducer_.parameterCount(); ++i) {
    parameters.push_back(reducer_.parameter(i));
    gradients.push_back(reducer_.gradient(i));
  }
  optimizer_->step(parameters, gradients);
  return true;
}

void DataParallelOptimizer::addToState(checkpoint::State& state, const std::string& prefix) {
  reducer_.addToState(state, prefix);
  for (size_t i = 0; i < reducer_.parameterCount(); ++i) {
    const Tensor value = reducer_.parameter(i);
    addOptimizerState(state, *optimizer_, i, value, prefix + "optim." + reducer_.parameterName(i),
                      value.sizes(), checkpoint::Slice::whole(value.sizes()));
  }
}

}  // namespace c10d::inline v1
