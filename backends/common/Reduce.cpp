#include "backends/common/Reduce.hpp"

#include "c10d/core/Exception.hpp"
#include "c10d/core/Kernels.hpp"

namespace c10d::inline v1 {

ReduceFunction reduceFunction(const ReduceOp& op, ScalarType dtype) {
  checkReduceOp(op, dtype, "reduce");
  ReduceFunction fn = kernels::best().combine(op.kind(), dtype);
  C10D_CHECK(fn != nullptr, InvalidArgument, "reduce op ", op, " is not defined on ", dtype);
  return fn;
}

void prepareReduce(const ReduceOp& op, ScalarType dtype, void* data, size_t n) {
  if (op.kind() != ReduceOp::PREMUL_SUM) return;
  kernels::best().scale(dtype, data, n, op.factor());
}

void finishReduce(const ReduceOp& op, ScalarType dtype, void* data, size_t n, int groupSize) {
  if (op.kind() != ReduceOp::AVG) return;
  kernels::best().divide(dtype, data, n, groupSize);
}

}  // namespace c10d::inline v1
