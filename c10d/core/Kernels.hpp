#pragma once

/// \file
/// The element-wise kernels under the collectives (reductions, scaling, float16/bfloat16
/// conversions), one Table per instruction set.
///
/// The element-wise kernels under the collectives: combining two ranks' values for a reduce op
/// (what Gloo's and MPI's reductions call), the steps around a sum-based one (PREMUL_SUM's
/// scaling before, AVG's division after), and the float32 <-> float16/bfloat16 conversions of the
/// compression hooks. One portable body (Kernels.inc) is compiled for each instruction set and the
/// best one this CPU runs is chosen once, at first use (C10D_KERNELS can choose a lower one).
///
/// Every table computes the same bits for the same inputs: IEEE round-to-nearest-even in float
/// for float16 and bfloat16, the same NaN for the same NaN (quiet, the input's sign and top
/// payload bits), operands in the same order for min and max. tests/unit/kernels_test.cpp compares
/// each table this CPU runs against the portable one.
///
/// Thread-safe: the tables are immutable.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"

/// The element-wise kernels under the collectives: one Table of functions per instruction set
/// (portable, avx2, avx512), all computing the same bits; best() picks the one in use.
namespace c10d::inline v1::kernels {

/// out[i] = a[i] op b[i] for n elements. out may be a or b, or apart from both; never a partial
/// overlap.
/// \param out n elements of the dtype the function was chosen for.
/// \param a The first operand's n elements.
/// \param b The second operand's n elements.
/// \param n The element count.
using Combine = void (*)(void* out, const void* a, const void* b, size_t n);

/// One build of the kernels: a name and a function for each step. Every table computes the same
/// bits for the same inputs; the functions may be called from any thread.
struct Table {
  const char* name;  ///< "portable", "avx2" (with FMA and F16C), "avx512" (F, BW, VL, DQ)
  /// The function for kind on dtype; nullptr where the op is not defined there. AVG and
  /// PREMUL_SUM combine by summing. Bool follows PyTorch: SUM and MAX are OR, PRODUCT and MIN AND.
  Combine (*combine)(ReduceOp::Kind kind, ScalarType dtype);
  /// data[i] *= factor: the product in double, rounded to the float type, or truncated toward
  /// zero through int64 and wrapped to the integer type (a product past int64 is undefined).
  void (*scale)(ScalarType dtype, void* data, size_t n, double factor);
  /// data[i] /= divisor, truncating for the integers.
  void (*divide)(ScalarType dtype, void* data, size_t n, int divisor);
  /// out[i] = low(float(in[i] * factor)), the product in double, low being Float16 or BFloat16
  /// (out holds its bits).
  void (*fromFloat)(ScalarType low, const float* in, void* out, size_t n, double factor);
  /// out[i] = float(in[i]), in holding Float16 or BFloat16 bits.
  void (*toFloat)(ScalarType low, const void* in, float* out, size_t n);
};

/// The table in use: C10D_KERNELS names one, else the best this CPU runs. InvalidArgument when
/// C10D_KERNELS names one this CPU cannot run.
/// Chosen once, by the first call that succeeds, which reads C10D_KERNELS.
/// \return The table in use, alive for the whole process.
/// \throws InvalidArgument when C10D_KERNELS names a table this CPU cannot run, or a value that
///         is not `auto`, `portable`, `avx2` or `avx512`.
const Table& best();
/// Every table this CPU runs, the portable one first.
/// \return The tables, static and immutable, from the narrowest to the widest.
std::vector<const Table*> available();

}  // namespace c10d::inline v1::kernels
