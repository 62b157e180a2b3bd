#pragma once

// Private to c10d/checkpoint (not installed): a slice as the runs of consecutive elements it
// holds in its global tensor's row-major order, and what two slices share. Both save (coverage,
// replicas) and load (which bytes of which stored slice land where) reduce to these.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "c10d/checkpoint/State.hpp"

namespace c10d::inline v1::checkpoint::detail {

// Elements [global, global + length) of the global tensor are the slice's elements
// [local, local + length).
struct Run {
  int64_t global = 0;
  int64_t local = 0;
  int64_t length = 0;
};

// The slice's runs, in increasing global order. A box is one run per combination of indices of
// its leading dimensions, up to the last one it does not cover whole.
inline std::vector<Run> runsOf(const Slice& slice, const std::vector<int64_t>& shape) {
  std::vector<Run> runs;
  if (slice.numel() == 0) return runs;
  if (slice.kind == Slice::Kind::Flat) {
    runs.push_back({slice.offsets[0], 0, slice.sizes[0]});
    return runs;
  }
  const size_t dims = shape.size();
  if (dims == 0) {
    runs.push_back({0, 0, 1});
    return runs;
  }
  std::vector<int64_t> stride(dims, 1);
  for (size_t d = dims - 1; d > 0; --d) stride[d - 1] = stride[d] * shape[d];
  size_t j = dims - 1;  // the run spans dimensions j.. (all whole after j)
  while (j > 0 && slice.sizes[j] == shape[j] && slice.offsets[j] == 0) --j;
  const int64_t length = slice.sizes[j] * stride[j];
  std::vector<int64_t> index(j, 0);  // over the box's leading dimensions 0..j-1
  int64_t local = 0;
  while (true) {
    int64_t global = slice.offsets[j] * stride[j];
    for (size_t d = 0; d < j; ++d) global += (slice.offsets[d] + index[d]) * stride[d];
    runs.push_back({global, local, length});
    local += length;
    size_t d = j;
    while (d > 0) {
      --d;
      if (++index[d] < slice.sizes[d]) break;
      index[d] = 0;
      if (d == 0) return runs;
    }
    if (j == 0) return runs;
  }
}

// What a target and a source slice share: the target's elements [target, target + length) are
// the source's [source, source + length).
struct Overlap {
  int64_t target = 0;
  int64_t source = 0;
  int64_t length = 0;
};

inline std::vector<Overlap> overlapsOf(const std::vector<Run>& target,
                                       const std::vector<Run>& source) {
  std::vector<Overlap> out;
  size_t t = 0, s = 0;
  while (t < target.size() && s < source.size()) {
    const Run& a = target[t];
    const Run& b = source[s];
    const int64_t begin = std::max(a.global, b.global);
    const int64_t end = std::min(a.global + a.length, b.global + b.length);
    if (begin < end) {
      const Overlap piece{a.local + begin - a.global, b.local + begin - b.global, end - begin};
      if (!out.empty() && out.back().target + out.back().length == piece.target &&
          out.back().source + out.back().length == piece.source) {
        out.back().length += piece.length;
      } else {
        out.push_back(piece);
      }
    }
    if (a.global + a.length <= b.global + b.length) {
      ++t;
    } else {
      ++s;
    }
  }
  return out;
}

// Where slices fail to cover a tensor of numel elements exactly once.
struct CoverFault {
  bool overlap = false;  // else a gap
  int64_t element = 0;   // the first element overlapped, or the first held by none
  size_t before = 0;     // the overlapping slices' tags (the earlier run's, then the later's)
  size_t after = 0;
};

// The first fault of the slices whose runs are given, each with its slice's tag; nullopt when
// they cover [0, numel) exactly once. Sorts runs.
inline std::optional<CoverFault> coverFault(std::vector<std::pair<Run, size_t>>& runs,
                                            int64_t numel) {
  std::sort(runs.begin(), runs.end(),
            [](const auto& a, const auto& b) { return a.first.global < b.first.global; });
  int64_t covered = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& run = runs[i].first;
    if (run.global > covered) return CoverFault{false, covered, 0, 0};
    if (run.global < covered)
      return CoverFault{true, run.global, runs[i - 1].second, runs[i].second};
    covered = run.global + run.length;
  }
  if (covered < numel) return CoverFault{false, covered, 0, 0};
  return std::nullopt;
}

// Equal for two slices that hold the same elements in the same order (a flat range and the box
// of the same elements included): replicas of one slice.
inline std::string canonicalKey(const Slice& slice, const std::vector<int64_t>& shape) {
  const std::vector<Run> runs = runsOf(slice, shape);
  if (runs.size() <= 1) {
    return runs.empty()
               ? "empty"
               : "run:" + std::to_string(runs[0].global) + "+" + std::to_string(runs[0].length);
  }
  std::string key = "box";
  for (size_t d = 0; d < slice.offsets.size(); ++d) {
    key += ":" + std::to_string(slice.offsets[d]) + "+" + std::to_string(slice.sizes[d]);
  }
  return key;
}

}  // namespace c10d::inline v1::checkpoint::detail
