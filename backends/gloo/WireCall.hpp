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
#include <string_view>

#include "c10d/core/Exception.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v0 {

// 24 bytes on the wire, in the sender's byte order (ranks of a group share an architecture).
struct WireCall {
  static constexpr uint8_t kAgreeing = 1;  // sent by agree(), before Gloo's own algorithm

  uint32_t seq = 0;  // the backend's collective sequence number (low 32 bits)
  uint8_t op = 0;    // index into kWireOps
  uint8_t dtype = 0;
  uint8_t reduceOp = 0;
  uint8_t flags = 0;
  uint32_t root = 0;
  uint32_t payloadBytes = 0;  // this message's payload, after the header; not part of the call
  uint64_t count = 0;         // elements of the sender's call (per rank; 0 where they may differ)

  static constexpr const char* kWireOps[] = {
      "allreduce",      "allreduce_coalesced",   "broadcast", "reduce",
      "allgather",      "allgather_into_tensor", "gather",    "scatter",
      "reduce_scatter", "reduce_scatter_tensor", "alltoall",  "alltoall_base",
      "barrier"};

  // The call of one rank; op must be one of kWireOps.
  static WireCall of(std::string_view op, ScalarType dtype, uint64_t count,
                     ReduceOp::Kind reduce = ReduceOp::SUM, int root = 0) {
    WireCall call;
    // Literals are merged by the linker: the pointer usually matches, without a compare.
    size_t i = 0;
    while (i < std::size(kWireOps) && kWireOps[i] != op.data()) ++i;
    if (i == std::size(kWireOps)) {
      i = 0;
      while (i < std::size(kWireOps) && kWireOps[i] != op) ++i;
    }
    if (i < std::size(kWireOps)) call.op = static_cast<uint8_t>(i);
    C10D_CHECK(std::string_view(kWireOps[call.op]) == op, InvalidArgument,
               "gloo backend: no wire code for '", op, "'");
    call.dtype = static_cast<uint8_t>(dtype);
    call.reduceOp = static_cast<uint8_t>(reduce);
    call.root = static_cast<uint32_t>(root);
    call.count = count;
    return call;
  }

  // Everything but the message's payload size.
  bool sameCall(const WireCall& other) const {
    return seq == other.seq && op == other.op && dtype == other.dtype &&
           reduceOp == other.reduceOp && flags == other.flags && root == other.root &&
           count == other.count;
  }

  // "allreduce float32 x 4 sum (seq 5)", "broadcast int64 x 8 root 1 (seq 2)".
  std::string describe() const {
    std::string_view name = op < std::size(kWireOps) ? kWireOps[op] : "an unknown op";
    std::string text = detail::concat(name, " ", static_cast<ScalarType>(dtype), " x ", count);
    if (name.find("reduce") != std::string_view::npos) {
      text += detail::concat(" ", c10d::name(static_cast<ReduceOp::Kind>(reduceOp)));
    }
    if (name == "broadcast" || name == "reduce" || name == "gather" || name == "scatter") {
      text += detail::concat(" root ", root);
    }
    return text + detail::concat(" (seq ", seq, ")");
  }
};
static_assert(sizeof(WireCall) == 24);

// A message that contradicts this rank's call: the stream of the pair it came on can no longer
// be trusted, so the group is broken (GlooBackend::Runtime::guarded turns this into an
// InvalidArgument that every rank of the group sees, directly or as the group's first failure).
struct WireMismatch {
  std::string message;
};

}  // namespace c10d::inline v0
