#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "c10d/Work.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

// Per-operation options. A timeout of kDefaultTimeout (c10d/Work.hpp) means the group's default
// timeout (C10D_TIMEOUT or the one given at creation). Ranks are ranks within the group.

struct BroadcastOptions {
  int rootRank = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

struct AllreduceOptions {
  ReduceOp reduceOp = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

struct ReduceOptions {
  ReduceOp reduceOp = ReduceOp::SUM;
  int rootRank = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

struct AllgatherOptions {
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

struct GatherOptions {
  int rootRank = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

struct ScatterOptions {
  int rootRank = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

struct ReduceScatterOptions {
  ReduceOp reduceOp = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

struct AllToAllOptions {
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

struct BarrierOptions {
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

/// Point-to-point: a send meets the receive of the same pair and tag (>= 0).
struct SendOptions {
  int tag = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

struct RecvOptions {
  int tag = 0;
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

/// The whole batch shares one timeout; each operation carries its own tag.
struct BatchP2POptions {
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

/// One point-to-point operation of batchIsendIrecv.
struct P2POp {
  enum Kind { Send, Recv } kind;
  Tensor tensor;
  int peer;  ///< destination of a send, source of a receive (group rank)
  int tag = 0;
};

}  // namespace c10d::inline v1
