#pragma once

#include <cstddef>
#include <cstdint>

#include "c10d/core/Kernels.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v1 {

// out[i] = a[i] op b[i] for n elements; out may alias a or b. The signature is Gloo's reduce
// function's, and MPI user ops wrap it too. The kernels are c10d/core/Kernels.hpp's, vectorized
// for the CPU.
using ReduceFunction = kernels::Combine;

// The element-wise function that combines two ranks' values for op on dtype. AVG and PREMUL_SUM
// combine by summing (see prepareReduce/finishReduce). float16 and bfloat16 compute in float and
// round once per combination. Bool follows PyTorch: SUM and MAX are OR, PRODUCT and MIN are AND.
// Throws InvalidArgument where !supports(op, dtype).
ReduceFunction reduceFunction(const ReduceOp& op, ScalarType dtype);

// Steps around a sum-based reduction: PREMUL_SUM scales the local input by its factor before,
// AVG divides the result by the group size after (truncating for integers). Other ops: no-ops.
void prepareReduce(const ReduceOp& op, ScalarType dtype, void* data, size_t n);
void finishReduce(const ReduceOp& op, ScalarType dtype, void* data, size_t n, int groupSize);

}  // namespace c10d::inline v1
