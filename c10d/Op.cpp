#include "c10d/Op.hpp"

#include <algorithm>
#include <iterator>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {
static_assert(std::size(kOpTraits) == kOpTypes);

std::string_view name(OpType type) {
  return static_cast<size_t>(type) < std::size(kOpTraits)
             ? kOpTraits[static_cast<size_t>(type)].name
             : std::string_view("an unknown op");
}

std::string describe(const Op& op) {
  const OpTraits& t = op.traits();
  std::string text(name(op.type));
  if (op.ndim >= 0) {
    text += " ";
    if (op.device != DeviceType::CPU) text += detail::concat(c10d::name(op.device), ":");
    text += detail::concat(op.dtype, "[");
    // -1: a size the ranks may choose apart (the DETAIL check's view of an all-to-all).
    for (int d = 0; d < op.ndim; ++d) {
      text += d ? ", " : "";
      text += op.dims[d] < 0 ? std::string("*") : std::to_string(op.dims[d]);
    }
    text += "]";
    if (op.tensors != 1) text += detail::concat(" x", op.tensors);
  } else if (op.ndim == Op::kCountOnly && op.type != OpType::Barrier) {
    text += detail::concat(" ", op.dtype, " x ", op.count);
  }
  if (t.reduces) text += detail::concat(" ", c10d::name(op.reduceOp.kind()));
  if (t.rooted) text += detail::concat(" root ", op.root);
  switch (op.type) {
    case OpType::Send:
      text += detail::concat(" to rank ", op.peer, " tag ", op.tag);
      break;
    case OpType::Recv:
      text += detail::concat(" from rank ", op.peer, " tag ", op.tag);
      break;
    case OpType::RecvAnysource:
      text += detail::concat(" from any rank tag ", op.tag);
      break;
    default:
      break;
  }
  return text;
}

std::string describeNumbered(const Op& op, const std::string* group) {
  const bool collective = op.traits().collective;
  std::string text = describe(op);
  if (group == nullptr) {
    return text + detail::concat(collective ? " (#" : " (point-to-point #", op.seq, ")");
  }
  return text + detail::concat(" (group '", *group, collective ? "', seq " : "', point-to-point #",
                               op.seq, ")");
}

}  // namespace c10d::inline v1
