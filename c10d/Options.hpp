#pragma once

/// \file
/// The options of ProcessGroup's operations, one struct per operation, and P2POp, one operation
/// of a batchIsendIrecv. Ranks in them are ranks within the group.

#include <chrono>
#include <cstdint>
#include <vector>

#include "c10d/Work.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

// Per-operation options. A timeout of kDefaultTimeout (c10d/Work.hpp) means the group's default
// timeout (C10D_TIMEOUT or the one given at creation). Ranks are ranks within the group.

/// Options of ProcessGroup::broadcast.
struct BroadcastOptions {
  /// The rank whose tensor every rank receives (a group rank).
  int rootRank = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< positive; kDefaultTimeout: the group's
};

/// Options of ProcessGroup::allreduce and allreduceCoalesced.
struct AllreduceOptions {
  /// How the ranks' values combine (defined on the dtype).
  ReduceOp reduceOp = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< positive; kDefaultTimeout: the group's
};

/// Options of ProcessGroup::reduce.
struct ReduceOptions {
  /// How the ranks' values combine (defined on the dtype).
  ReduceOp reduceOp = ReduceOp::SUM;
  /// The rank that receives the result (a group rank).
  int rootRank = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< positive; kDefaultTimeout: the group's
};

/// Options of ProcessGroup::allgather and allgatherIntoTensor.
struct AllgatherOptions {
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< positive; kDefaultTimeout: the group's
};

/// Options of ProcessGroup::gather.
struct GatherOptions {
  /// The rank that gathers every rank's input (a group rank).
  int rootRank = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< positive; kDefaultTimeout: the group's
};

/// Options of ProcessGroup::scatter.
struct ScatterOptions {
  /// The rank whose inputs are scattered (a group rank).
  int rootRank = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< positive; kDefaultTimeout: the group's
};

/// Options of ProcessGroup::reduceScatter and reduceScatterTensor.
struct ReduceScatterOptions {
  /// How the ranks' values combine (defined on the dtype).
  ReduceOp reduceOp = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< positive; kDefaultTimeout: the group's
};

/// Options of ProcessGroup::alltoall and alltoallBase.
struct AllToAllOptions {
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< positive; kDefaultTimeout: the group's
};

/// Options of ProcessGroup::barrier and monitoredBarrier.
struct BarrierOptions {
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< positive; kDefaultTimeout: the group's
};

/// Options of ProcessGroup::send. Point-to-point: a send meets the receive of the same pair and
/// tag (>= 0).
struct SendOptions {
  /// The tag (>= 0); the receive must use the same one.
  int tag = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< positive; kDefaultTimeout: the group's
};

/// Options of ProcessGroup::recv and recvAnysource.
struct RecvOptions {
  /// The tag (>= 0); the send must use the same one.
  int tag = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< positive; kDefaultTimeout: the group's
};

/// Options of ProcessGroup::batchIsendIrecv. The whole batch shares one timeout; each operation
/// carries its own tag.
struct BatchP2POptions {
  std::chrono::milliseconds timeout = kDefaultTimeout;  ///< positive; kDefaultTimeout: the group's
};

/// One point-to-point operation of batchIsendIrecv.
struct P2POp {
  /// Whether the operation sends or receives.
  enum Kind { Send, Recv } kind;  ///< Send or Recv
  Tensor tensor;                  ///< the data to send, or the buffer to receive into
  int peer;                       ///< destination of a send, source of a receive (group rank)
  /// The tag (>= 0); the other side's must be the same.
  int tag = 0;
  /// \var Send
  /// The operation sends tensor to peer.
  /// \var Recv
  /// The operation receives from peer into tensor.
};

}  // namespace c10d::inline v1
