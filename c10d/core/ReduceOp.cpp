#include "c10d/core/ReduceOp.hpp"

#include <cctype>
#include <string>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

ReduceOp ReduceOp::premulSum(double factor) {
  ReduceOp op(PREMUL_SUM);
  op.factor_ = factor;
  return op;
}

std::string_view name(ReduceOp::Kind kind) {
  switch (kind) {
    case ReduceOp::SUM:
      return "sum";
    case ReduceOp::AVG:
      return "avg";
    case ReduceOp::PRODUCT:
      return "product";
    case ReduceOp::MIN:
      return "min";
    case ReduceOp::MAX:
      return "max";
    case ReduceOp::BAND:
      return "band";
    case ReduceOp::BOR:
      return "bor";
    case ReduceOp::BXOR:
      return "bxor";
    case ReduceOp::PREMUL_SUM:
      return "premul_sum";
  }
  return "invalid";
}

std::ostream& operator<<(std::ostream& out, const ReduceOp& op) {
  out << name(op.kind());
  if (op.kind() == ReduceOp::PREMUL_SUM) out << "(" << op.factor() << ")";
  return out;
}

ReduceOp::Kind reduceOpFromName(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (int k = ReduceOp::SUM; k <= ReduceOp::PREMUL_SUM; ++k) {
    if (name(static_cast<ReduceOp::Kind>(k)) == lower) return static_cast<ReduceOp::Kind>(k);
  }
  if (lower == "prod") return ReduceOp::PRODUCT;
  C10D_THROW(InvalidArgument, "unknown reduce op '", text,
             "'; expected sum, avg, product, min, max, band, bor, bxor or premul_sum");
}

void detail::refuseReduceOp(const ReduceOp& op, ScalarType dtype, std::string_view where) {
  bool bitwise =
      op.kind() == ReduceOp::BAND || op.kind() == ReduceOp::BOR || op.kind() == ReduceOp::BXOR;
  C10D_THROW(InvalidArgument, where, ": reduce op ", op, " is not defined on ", dtype,
             bitwise ? "; bitwise ops take integer or bool tensors"
                     : "; this op takes floating-point or integer tensors");
}

}  // namespace c10d::inline v1
