#pragma once

// How ZeroOptimizer and FullyShardedLayers cut a flat run of n elements over N ranks: equal
// parts of ceil(n / N) (the last padded), rank r owning [r * part, r * part + count). Private to
// c10d/parallel (not installed).

#include <algorithm>
#include <cstdint>

namespace c10d::inline v1::detail {

struct Shard {
  int64_t part = 0;   // every rank's part, padding included: N * part >= n
  int64_t begin = 0;  // this rank's first element
  int64_t count = 0;  // this rank's elements that exist (part, or fewer for the last ranks)
};

inline Shard shardOf(int64_t elements, int ranks, int rank) {
  Shard shard;
  shard.part = (elements + ranks - 1) / ranks;
  shard.begin = std::min(elements, rank * shard.part);
  shard.count = std::min(elements, shard.begin + shard.part) - shard.begin;
  return shard;
}

}  // namespace c10d::inline v1::detail
