#pragma once

/// \file
/// ReduceOp, how a reduction combines the ranks' values, with its names and the check of which
/// dtypes each op is defined on.

#include <ostream>
#include <string_view>

#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v1 {

/// How a reduction combines the ranks' values. PREMUL_SUM multiplies each input by factor
/// before summing (NCCL's ncclRedOpCreatePreMulSum); AVG is SUM divided by the group size.
class ReduceOp {
 public:
  /// The operation. SUM, PRODUCT, MIN and MAX combine element-wise; AVG is SUM divided by the
  /// group size; BAND, BOR and BXOR are bitwise and, or and exclusive or (integers and bool);
  /// PREMUL_SUM multiplies each input by factor() before summing (make it with premulSum()).
  enum Kind : uint8_t { SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM };

  /// Converts implicitly, so that ReduceOp::MAX can be passed where a ReduceOp is expected.
  /// \param kind The operation; PREMUL_SUM made this way has factor 1.0 (use premulSum()).
  ReduceOp(Kind kind = SUM) : kind_(kind) {}  // NOLINT: implicit, so ReduceOp::MAX reads naturally
  /// \param factor What each rank's input is multiplied by before the sum.
  /// \return A PREMUL_SUM op with that factor.
  static ReduceOp premulSum(double factor);

  /// \return The operation.
  Kind kind() const { return kind_; }
  /// \return PREMUL_SUM's factor; 1.0 for every other kind.
  double factor() const { return factor_; }  // PREMUL_SUM only; 1.0 otherwise

  /// \param a One op.
  /// \param b The other op.
  /// \return Whether both have the same kind and the same factor.
  friend bool operator==(const ReduceOp& a, const ReduceOp& b) {
    return a.kind_ == b.kind_ && a.factor_ == b.factor_;
  }

 private:
  Kind kind_;
  double factor_ = 1.0;
};

/// \param kind The operation.
/// \return Its lower-case name (the enumerator's); "invalid" for a value that is no Kind.
std::string_view name(ReduceOp::Kind kind);  ///< "sum", "avg", "premul_sum", ...
/// Writes op's name to out, and for PREMUL_SUM its factor: "premul_sum(0.25)".
/// \param out The stream to write to.
/// \param op The op to write.
/// \return out.
std::ostream& operator<<(std::ostream& out, const ReduceOp& op);

/// Parses the names name() prints, case-insensitively. Throws InvalidArgument otherwise.
/// \param text An op's name; "prod" is accepted for PRODUCT too.
/// \return The Kind it names.
/// \throws InvalidArgument when text names no op.
ReduceOp::Kind reduceOpFromName(std::string_view text);

/// Whether op is defined on dtype: bitwise ops need integers or bool; AVG and PREMUL_SUM need
/// a number type that is not bool.
/// \param op The reduce op.
/// \param dtype The tensors' element type.
/// \return Whether op can reduce tensors of dtype.
inline bool supports(const ReduceOp& op, ScalarType dtype) {
  switch (op.kind()) {
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR:
      return isIntegral(dtype) || dtype == ScalarType::Bool;
    case ReduceOp::AVG:
    case ReduceOp::PREMUL_SUM:
      return dtype != ScalarType::Bool;
    default:
      return true;
  }
}

// Throws InvalidArgument when !supports(op, dtype), naming both and what op accepts.
// where names the call for the message, e.g. "allreduce".
namespace detail {
[[noreturn]] void refuseReduceOp(const ReduceOp& op, ScalarType dtype, std::string_view where);
}
/// Throws InvalidArgument when !supports(op, dtype), naming both and what op accepts.
/// \param op The reduce op.
/// \param dtype The tensors' element type.
/// \param where The call, for the message, e.g. "allreduce".
/// \throws InvalidArgument when op is not defined on dtype.
inline void checkReduceOp(const ReduceOp& op, ScalarType dtype, std::string_view where) {
  if (!supports(op, dtype)) detail::refuseReduceOp(op, dtype, where);
}

}  // namespace c10d::inline v1
