#pragma once

#include <ostream>
#include <string_view>

#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v1 {

/// How a reduction combines the ranks' values. PREMUL_SUM multiplies each input by factor
/// before summing (NCCL's ncclRedOpCreatePreMulSum); AVG is SUM divided by the group size.
class ReduceOp {
 public:
  enum Kind : uint8_t { SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM };

  ReduceOp(Kind kind = SUM) : kind_(kind) {}  // NOLINT: implicit, so ReduceOp::MAX reads naturally
  static ReduceOp premulSum(double factor);

  Kind kind() const { return kind_; }
  double factor() const { return factor_; }  // PREMUL_SUM only; 1.0 otherwise

  friend bool operator==(const ReduceOp& a, const ReduceOp& b) {
    return a.kind_ == b.kind_ && a.factor_ == b.factor_;
  }

 private:
  Kind kind_;
  double factor_ = 1.0;
};

std::string_view name(ReduceOp::Kind kind);  ///< "sum", "avg", "premul_sum", ...
std::ostream& operator<<(std::ostream& out, const ReduceOp& op);

/// Parses the names name() prints, case-insensitively. Throws InvalidArgument otherwise.
ReduceOp::Kind reduceOpFromName(std::string_view text);

/// Whether op is defined on dtype: bitwise ops need integers or bool; AVG and PREMUL_SUM need
/// a number type that is not bool.
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
inline void checkReduceOp(const ReduceOp& op, ScalarType dtype, std::string_view where) {
  if (!supports(op, dtype)) detail::refuseReduceOp(op, dtype, where);
}

}  // namespace c10d::inline v1
