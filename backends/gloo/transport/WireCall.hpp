#pragma once

// Private to backends/gloo. The always-on check that ranks make the same collective: every
// message of the small-message path (SyncMesh) starts with the sender's WireCall, and the
// receiver compares it with its own before it uses a byte of the payload. Ops that take Gloo's
// own algorithms (whose messages we cannot extend) first gather every rank's WireCall (see
// GlooBackend::Runtime::agree), so mismatched calls never reach Gloo, whose checks abort the
// process from its device thread.

#include <cstdint>
#include <cstring>
#include <string>

#include "c10d/Op.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v1 {

// 24 bytes on the wire, in the sender's byte order (ranks of a group share an architecture): the
// fields of the sender's Op (c10d/Op.hpp) that every rank's must match.
struct WireCall {
  static constexpr uint8_t kAgreeing = 1;  // sent by agree(), before Gloo's own algorithm
  static constexpr uint8_t kCheck = 2;     // C10D_DEBUG=DETAIL's exchange (Op::kCheck)

  uint32_t seq = 0;  // the group's collective sequence number (low 32 bits)
  uint8_t op = 0;    // OpType
  uint8_t dtype = 0;
  uint8_t reduceOp = 0;
  uint8_t flags = 0;
  uint32_t root = 0;
  uint32_t payloadBytes = 0;  // this message's payload, after the header; not part of the call
  uint64_t count = 0;         // Op::count

  // The call of op, as this rank makes it.
  static WireCall of(const Op& op) {
    WireCall call;
    call.seq = static_cast<uint32_t>(op.seq);
    call.op = static_cast<uint8_t>(op.type);
    call.dtype = static_cast<uint8_t>(op.dtype);
    call.reduceOp = op.traits().reduces ? static_cast<uint8_t>(op.reduceOp.kind()) : 0;
    call.flags = (op.flags & Op::kCheck) ? kCheck : 0;
    call.root = op.traits().rooted ? static_cast<uint32_t>(op.root) : 0;
    call.count = static_cast<uint64_t>(op.count);
    return call;
  }

  // Everything but the message's payload size.
  bool sameCall(const WireCall& other) const {
    return seq == other.seq && op == other.op && dtype == other.dtype &&
           reduceOp == other.reduceOp && flags == other.flags && root == other.root &&
           count == other.count;
  }

  // The Op this describes (no sizes: "allreduce float32 x 4 sum (#5)").
  Op asOp() const {
    Op call;
    call.type = op < kOpTypes ? static_cast<OpType>(op) : OpType::Barrier;
    call.dtype = static_cast<ScalarType>(dtype);
    call.ndim = Op::kCountOnly;
    call.count = static_cast<int64_t>(count);
    call.reduceOp = ReduceOp(static_cast<ReduceOp::Kind>(reduceOp));
    call.root = static_cast<int32_t>(root);
    call.seq = seq;
    return call;
  }
  std::string describe() const {
    if (op >= kOpTypes) return detail::concat("an unknown op (#", seq, ")");
    return describeNumbered(asOp()) + (flags & kCheck ? " (C10D_DEBUG=DETAIL's check)" : "");
  }
};
static_assert(sizeof(WireCall) == 24);

// A message that contradicts this rank's call: the stream of the pair it came on can no longer
// be trusted, so the group is broken (GlooBackend::Runtime::guarded turns this into an
// InvalidArgument that every rank of the group sees, directly or as the group's first failure).
struct WireMismatch {
  std::string message;
};

}  // namespace c10d::inline v1
