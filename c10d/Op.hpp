#pragma once

/// \file
/// Op, one operation of a process group described once, and the table of op types
/// (C10D_FORALL_OPS, OpType, OpTraits).
///
/// One operation of a process group, described once: ProcessGroup fills an Op at its front door
/// (after validating the call), numbers it, and every layer below reads that same Op: the backend
/// runs it, the Gloo wire check sends its fields, C10D_DEBUG=DETAIL compares it across ranks, the
/// flight recorder keeps it, and errors, logs and Work::description() are formatted from it when
/// someone reads them. The ops themselves are one table, C10D_FORALL_OPS.
///
/// Threading: an Op is a plain value.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "c10d/core/Device.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

/// Every op, once: X(Enumerator, "name", collective, rooted, reduces, parts, inPlace, shapes).
///   collective  false for point-to-point ops (numbered apart: ranks make different ones)
///   rooted      root names the rank that broadcasts, reduces, gathers or scatters
///   reduces     reduceOp applies
///   parts       the op's tensor (Op::dims) is one of the group's N parts of its buffer
///               (OpTraffic counts N of them)
///   inPlace     the op writes its input (tensors.input, or allreduce_coalesced's inputs)
///   shapes      how much of that tensor's shape every rank must share (C10D_DEBUG=DETAIL):
///               Same, AnyRows (dim 0 may differ: uneven all-to-all), Any
/// The enumerators' order is the wire code of the Gloo backend's check: append, never reorder.
/// \param X a macro of those eight arguments, expanded once per op, in table order.
#define C10D_FORALL_OPS(X)                                                               \
  X(Broadcast, "broadcast", true, true, false, false, true, Same)                        \
  X(Allreduce, "allreduce", true, false, true, false, true, Same)                        \
  X(AllreduceCoalesced, "allreduce_coalesced", true, false, true, false, true, Same)     \
  X(Reduce, "reduce", true, true, true, false, true, Same)                               \
  X(Allgather, "allgather", true, false, false, true, false, Same)                       \
  X(AllgatherIntoTensor, "allgather_into_tensor", true, false, false, true, false, Same) \
  X(Gather, "gather", true, true, false, true, false, Same)                              \
  X(Scatter, "scatter", true, true, false, true, false, Same)                            \
  X(ReduceScatter, "reduce_scatter", true, false, true, true, false, Same)               \
  X(ReduceScatterTensor, "reduce_scatter_tensor", true, false, true, true, false, Same)  \
  X(Alltoall, "alltoall", true, false, false, false, false, Any)                         \
  X(AlltoallBase, "alltoall_base", true, false, false, false, false, AnyRows)            \
  X(Barrier, "barrier", true, false, false, false, false, Same)                          \
  X(Send, "send", false, false, false, false, false, Same)                               \
  X(Recv, "recv", false, false, false, false, true, Same)                                \
  X(RecvAnysource, "recv_anysource", false, false, false, false, true, Same)

/// The type of an op: one enumerator per row of C10D_FORALL_OPS, in its order: Broadcast,
/// Allreduce, AllreduceCoalesced, Reduce, Allgather, AllgatherIntoTensor, Gather, Scatter,
/// ReduceScatter, ReduceScatterTensor, Alltoall, AlltoallBase, Barrier, Send, Recv, RecvAnysource.
enum class OpType : uint8_t {
/// \cond
#define C10D_OP_ENUMERATOR(name, ...) name,
  /// \endcond
  C10D_FORALL_OPS(C10D_OP_ENUMERATOR)
#undef C10D_OP_ENUMERATOR
};

/// The number of op types (rows of C10D_FORALL_OPS).
inline constexpr int kOpTypes = 0
/// \cond
#define C10D_OP_COUNT(...) +1
    /// \endcond
    C10D_FORALL_OPS(C10D_OP_COUNT)
#undef C10D_OP_COUNT
    ;

/// What the table says of an op type.
struct OpTraits {
  /// How much of the op's tensor's shape every rank must share (C10D_DEBUG=DETAIL checks it).
  enum class Shapes : uint8_t { Same, AnyRows, Any };
  /// \var Shapes::Same
  /// Every rank's sizes are the same.
  /// \var Shapes::AnyRows
  /// Dim 0 may differ between ranks (uneven all-to-all); the other sizes are the same.
  /// \var Shapes::Any
  /// The shapes may differ.
  std::string_view name;  ///< "allreduce": torch.distributed's name
  bool collective;        ///< false for point-to-point ops (numbered apart)
  bool rooted;            ///< Op::root names the rank that broadcasts, reduces, gathers or scatters
  bool reduces;           ///< Op::reduceOp applies
  bool parts;             ///< the op's tensor is one of the group's N parts of its buffer
  bool inPlace;           ///< the op writes its input
  Shapes shapes;          ///< how much of the tensor's shape every rank must share
};

/// Every op type's traits, indexed by OpType (prefer traits(), which checks the index).
inline constexpr OpTraits kOpTraits[] = {
/// \cond
#define C10D_OP_TRAITS(enumerator, text, collective, rooted, reduces, parts, inPlace, shapes) \
  {text, collective, rooted, reduces, parts, inPlace, OpTraits::Shapes::shapes},
    /// \endcond
    C10D_FORALL_OPS(C10D_OP_TRAITS)
#undef C10D_OP_TRAITS
};

/// An op type's traits; a value that is no OpType reads as a barrier's.
/// \param type an op type.
/// \return Its row of kOpTraits.
inline const OpTraits& traits(OpType type) {
  const auto index = static_cast<size_t>(type);
  return kOpTraits[index < static_cast<size_t>(kOpTypes) ? index
                                                         : static_cast<size_t>(OpType::Barrier)];
}
/// \param type an op type.
/// \return Its name, torch.distributed's ("allreduce"); "an unknown op" for a value that is no
///     OpType.
std::string_view name(OpType type);

/// One operation as its ProcessGroup issued it. Fields an op type has no use for keep their
/// defaults (root -1 for ops that are not rooted, reduceOp SUM for ops that do not reduce, peer
/// -1 and tag 0 for collectives), so two ranks' Ops of the same call compare equal field by field.
struct Op {
  static constexpr int kMaxDims = 6;        ///< the most sizes an Op keeps (see dims)
  static constexpr int8_t kNoTensor = -1;   ///< ndim of an op without a tensor (barrier)
  static constexpr int8_t kCountOnly = -2;  ///< an Op read off the wire: dtype and count, no sizes
  /// A bit of flags (kStaged is the other).
  /// Ops run on behalf of another, under its number (they take none of their own); the op they
  /// serve is the one recorded and logged. kCheck: C10D_DEBUG=DETAIL's exchange before collective
  /// seq (its wire messages say so). kStaged: the host-memory copy of a device tensor's op
  /// (HostStagingBackend's inner op).
  static constexpr uint8_t kCheck = 1;
  static constexpr uint8_t kStaged = 2;  ///< flags bit: HostStagingBackend's inner op (see kCheck)

  /// The op's type.
  /// (The sizes come last: a copy of an Op may stop after the ndim of them it has.)
  OpType type = OpType::Barrier;
  ScalarType dtype = ScalarType::UInt8;  ///< the element type of the op's tensor
  DeviceType device = DeviceType::CPU;   ///< the device type of the op's tensor
  int8_t ndim = kNoTensor;               ///< of dims (kNoTensor, kCountOnly: no sizes)
  uint8_t flags = 0;                     ///< kCheck, kStaged, or 0 for an op of its own
  /// Elements of the op on this rank as the wire check compares them: the tensor's, the sum of a
  /// coalesced list's, 0 where ranks may differ (alltoall lists, uneven alltoall_base).
  int64_t count = 0;
  int32_t tensors = 0;  ///< tensors in the list of allreduce_coalesced and alltoall; 1 otherwise
  int32_t root = -1;    ///< rooted ops: the root's group rank; -1 otherwise
  ReduceOp reduceOp = ReduceOp::SUM;  ///< ops that reduce: how; SUM otherwise
  int32_t peer = -1;  ///< point-to-point: the other rank; -1 for a receive from any rank
  int32_t tag = 0;    ///< point-to-point
  /// Collectives: the group's number for this one, from 0, the same on every rank (the wire
  /// check, the DETAIL check, the flight recorder and ErrorContext::sequence all use it).
  /// Point-to-point ops: this rank's count of its point-to-point ops in the group.
  uint64_t seq = 0;
  /// The op's own (resolved: never kDefaultTimeout).
  std::chrono::milliseconds timeout{0};
  /// The sizes of the op's tensor (its input; for scatter and reduce_scatter its output; the
  /// first of a list), up to kMaxDims (a deeper tensor's last entry is the product of the rest).
  int64_t dims[kMaxDims] = {};

  /// An op of type on tensor (dtype, device and sizes from it), of its elements, one tensor.
  /// \param type the op's type.
  /// \param tensor the op's tensor.
  /// \param timeout the op's timeout (resolved).
  /// \return The Op, its other fields at their defaults (seq 0: ProcessGroup numbers it).
  static Op on(OpType type, const Tensor& tensor, std::chrono::milliseconds timeout);
  /// \return This op's type's traits.
  const OpTraits& traits() const { return c10d::traits(type); }
  /// Sets dtype, device, ndim and dims from tensor.
  /// \param tensor the op's tensor.
  void setTensor(const Tensor& tensor);
};

/// "allreduce float32[4] sum", "broadcast cuda:float32[2, 3] root 1", "send float32[4] to rank 1
/// tag 0", "barrier": what the op is, without its number. Shapes come from dims; an Op that has
/// only a count (one read off the wire) reads "float32 x 4".
/// \param op the op.
/// \return Its description.
std::string describe(const Op& op);
/// describe(op) and its number: " (#12)" for a collective, " (point-to-point #3)" otherwise;
/// with group, " (group 'g', seq 12)" and " (group 'g', point-to-point #3)".
/// \param op the op.
/// \param group the group's name; null to name none.
/// \return The numbered description.
std::string describeNumbered(const Op& op, const std::string* group = nullptr);

/// Every op of the front door makes one of these: inline.
inline Op Op::on(OpType type, const Tensor& tensor, std::chrono::milliseconds timeout) {
  Op op;
  op.type = type;
  op.setTensor(tensor);
  op.count = tensor.numel();
  op.tensors = 1;
  op.timeout = timeout;
  return op;
}

inline void Op::setTensor(const Tensor& tensor) {
  dtype = tensor.dtype();
  device = tensor.device().type;
  const std::vector<int64_t>& sizes = tensor.sizes();
  const auto n = static_cast<int>(sizes.size());
  if (n <= kMaxDims) {
    ndim = static_cast<int8_t>(n);
    for (int d = 0; d < n; ++d) dims[d] = sizes[d];
    return;
  }
  ndim = kMaxDims;
  for (int d = 0; d < kMaxDims; ++d) dims[d] = sizes[d];
  for (int d = kMaxDims; d < n; ++d) dims[kMaxDims - 1] *= sizes[d];
}

}  // namespace c10d::inline v1
