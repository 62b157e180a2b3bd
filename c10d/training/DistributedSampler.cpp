#include "c10d/training/DistributedSampler.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <utility>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {
namespace {

// A uniform draw from [0, bound) by rejection: the values past the last whole multiple of
// bound are redrawn, so no index is favoured.
uint64_t below(std::mt19937_64& generator, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t value;
  do {
    value = generator();
  } while (value >= limit);
  return value % bound;
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t datasetSize, int numReplicas, int rank,
                                       DistributedSamplerOptions options)
    : datasetSize_(datasetSize), numReplicas_(numReplicas), rank_(rank), options_(options) {
  C10D_CHECK(datasetSize >= 0, InvalidArgument, "DistributedSampler: dataset size ", datasetSize,
             " is negative");
  C10D_CHECK(numReplicas >= 1, InvalidArgument,
             "DistributedSampler: numReplicas must be >= 1, got ", numReplicas);
  C10D_CHECK(rank >= 0 && rank < numReplicas, InvalidArgument, "DistributedSampler: rank ", rank,
             " is outside [0, ", numReplicas, ")");
  C10D_CHECK(!options.dropLast || datasetSize >= numReplicas, InvalidArgument,
             "DistributedSampler: dropLast with ", datasetSize, " samples for ", numReplicas,
             " replicas would leave none");
  countSamples();
}

void DistributedSampler::countSamples() {
  const int64_t rest = std::max<int64_t>(0, datasetSize_ - start_);
  numSamples_ = options_.dropLast ? rest / numReplicas_ : (rest + numReplicas_ - 1) / numReplicas_;
}

void DistributedSampler::setEpoch(uint64_t epoch) {
  epoch_ = epoch;
  start_ = 0;
  countSamples();
}

void DistributedSampler::setStartIndex(int64_t consumed) {
  C10D_CHECK(consumed >= 0, InvalidArgument, "DistributedSampler: start index ", consumed,
             " is negative");
  start_ = consumed;
  countSamples();
}

void DistributedSampler::addToState(checkpoint::State& state, const std::string& prefix,
                                    int64_t takenOnThisRank) {
  C10D_CHECK(takenOnThisRank >= 0, InvalidArgument, "DistributedSampler: ", takenOnThisRank,
             " samples taken");
  state.setInt(prefix + "epoch", static_cast<int64_t>(epoch_));
  state.setInt(prefix + "seed", static_cast<int64_t>(options_.seed));
  state.setInt(prefix + "consumed", start_ + takenOnThisRank * numReplicas_);
  state.onLoad([this, prefix](const checkpoint::State& loaded) {
    options_.seed = static_cast<uint64_t>(loaded.getInt(prefix + "seed"));
    setEpoch(static_cast<uint64_t>(loaded.getInt(prefix + "epoch")));
    setStartIndex(loaded.getInt(prefix + "consumed"));
  });
}

std::vector<int64_t> DistributedSampler::order() const {
  std::vector<int64_t> order(static_cast<size_t>(datasetSize_));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (options_.shuffle) {
    std::mt19937_64 generator(options_.seed + epoch_);
    for (size_t i = order.size(); i > 1; --i) {  // Fisher-Yates
      std::swap(order[i - 1], order[below(generator, i)]);
    }
  }
  return order;
}

std::vector<int64_t> DistributedSampler::window(int64_t first, int64_t count) const {
  C10D_CHECK(first >= 0 && count >= 0, InvalidArgument, "DistributedSampler: window [", first, ", ",
             first, " + ", count, ") of the epoch is negative");
  const std::vector<int64_t> all = order();
  std::vector<int64_t> mine;
  const int64_t end = std::min(datasetSize_, first + count);
  for (int64_t at = first + rank_; at < end; at += numReplicas_) {
    mine.push_back(all[static_cast<size_t>(at)]);
  }
  return mine;
}

void DistributedSampler::reshard(int numReplicas, int rank) {
  C10D_CHECK(numReplicas >= 1, InvalidArgument,
             "DistributedSampler: numReplicas must be >= 1, got ", numReplicas);
  C10D_CHECK(rank >= 0 && rank < numReplicas, InvalidArgument, "DistributedSampler: rank ", rank,
             " is outside [0, ", numReplicas, ")");
  numReplicas_ = numReplicas;
  rank_ = rank;
  countSamples();
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order = this->order();
  // What a resumed epoch has left; then dropping its tail (total < rest) or padding by repeating
  // it from its start.
  order.erase(order.begin(), order.begin() + std::min<int64_t>(start_, datasetSize_));
  const auto total = static_cast<size_t>(totalSize());
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(numSamples_));
  for (size_t i = static_cast<size_t>(rank_); i < total; i += static_cast<size_t>(numReplicas_)) {
    mine.push_back(order[i % order.size()]);
  }
  return mine;
}

}  // namespace c10d::inline v1
