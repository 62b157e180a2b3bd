#pragma once

// C10D_DEBUG support for ProcessGroup: what one collective call looks like on one rank (its
// fingerprint), and the check that every rank of a group is making the same call.
//
//   C10D_DEBUG=OFF (default)  nothing is checked or logged.
//   C10D_DEBUG=INFO           group creation and each collective's duration are logged.
//   C10D_DEBUG=DETAIL         INFO, and before each collective the ranks exchange their
//                             fingerprints through the job's store (any backend; without a
//                             shared store, an allgather on the group's CPU backend); a
//                             mismatch throws InvalidArgument on every rank, naming the ranks
//                             and their calls.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "c10d/core/Config.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v0 {

enum class DebugLevel { Off = 0, Info = 1, Detail = 2 };

// C10D_DEBUG of a group's settings. Throws InvalidArgument for a value that is not OFF, INFO or
// DETAIL.
DebugLevel debugLevel(const config::Settings& settings);

namespace detail {

// One collective call as the other ranks must also make it.
struct CollectiveFingerprint {
  static constexpr int kMaxDims = 6;
  static constexpr int64_t kWords = 8 + kMaxDims;

  uint64_t sequence = 0;  // the group's collective count before this one
  std::string op;         // "allreduce", ...
  int64_t dtype = -1;     // ScalarType, -1: no tensor (barrier)
  int64_t device = -1;    // DeviceType
  std::vector<int64_t> sizes;
  int64_t tensors = 0;  // how many tensors a list op carries
  int64_t root = -1;
  int64_t reduceOp = -1;  // ReduceOp::Kind

  static CollectiveFingerprint of(uint64_t sequence, const char* op, const Tensor* tensor,
                                  int64_t tensors = 1, int64_t root = -1,
                                  std::optional<ReduceOp> reduceOp = std::nullopt);
  // The same, written over `into`: its string and vector keep their buffers.
  static void assign(CollectiveFingerprint& into, uint64_t sequence, const char* op,
                     const Tensor* tensor, int64_t tensors, int64_t root,
                     std::optional<ReduceOp> reduceOp);

  // "allreduce float32[1024] sum", "broadcast float32[10] root 0" (with " #seq").
  std::string describe() const;
  Tensor encode() const;
  static CollectiveFingerprint decode(const Tensor& words);
};

// Empty when all ranks' fingerprints agree; else "rank 0, 1: allreduce float32[4] sum;
// rank 2: broadcast float32[10] root 0".
std::string describeMismatch(const std::vector<CollectiveFingerprint>& byRank);

}  // namespace detail
}  // namespace c10d::inline v0
