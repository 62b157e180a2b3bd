#pragma once

/// \file
/// C10D_DEBUG's levels (DebugLevel, debugLevel) and the check that every rank makes the same
/// collective call.
///
/// C10D_DEBUG support for ProcessGroup: the level, and the check that every rank of a group is
/// making the same collective call.
///
/// - C10D_DEBUG=OFF (default): nothing is checked or logged.
/// - C10D_DEBUG=INFO: group creation and each collective's duration are logged.
/// - C10D_DEBUG=DETAIL: INFO, and before each collective the ranks exchange their Ops
///   (c10d/Op.hpp) through the job's store (any backend; without a shared store, an allgather
///   on the group's CPU backend); a mismatch throws InvalidArgument on every rank, naming the
///   ranks and their calls.

#include <cstdint>
#include <string>
#include <vector>

#include "c10d/Op.hpp"
#include "c10d/core/Config.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

/// A group's C10D_DEBUG level.
enum class DebugLevel { Off = 0, Info = 1, Detail = 2 };
/// \var DebugLevel::Off
/// C10D_DEBUG=OFF (the default): nothing is checked or logged.
/// \var DebugLevel::Info
/// C10D_DEBUG=INFO: group creation and each collective's duration are logged.
/// \var DebugLevel::Detail
/// C10D_DEBUG=DETAIL: as INFO, and every collective is first checked to be the same call on every
/// rank.

/// C10D_DEBUG of a group's settings. Throws InvalidArgument for a value that is not OFF, INFO or
/// DETAIL.
/// \param settings the group's settings (ProcessGroupOptions::config over the environment).
/// \return The level they give; OFF when C10D_DEBUG is unset.
DebugLevel debugLevel(const config::Settings& settings);

namespace detail {

/// The fields of op every rank must share (its sequence number, type, dtype, device, sizes as far
/// as the op type fixes them, list length, root and reduce op), as kCallWords int64 words.
inline constexpr int64_t kCallWords = 8 + Op::kMaxDims;
Tensor encodeCall(const Op& op);
/// An Op with the fields encodeCall carries; sizes a rank may choose read -1.
Op decodeCall(const Tensor& words);

/// Empty when all ranks' calls agree; else "ranks 0, 1: allreduce float32[4] sum (#3);
/// rank 2: broadcast float32[10] root 0 (#3)".
std::string describeMismatch(const std::vector<Op>& byRank);

}  // namespace detail
}  // namespace c10d::inline v1
