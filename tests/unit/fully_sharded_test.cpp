// FullyShardedLayers: gathers give the full layers, gradients are averaged into the shards, a
// step updates what the next gather returns, and a rank holds its shards plus the gathered
// layers only; on ranks as threads.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "c10d/parallel/FullySharded.hpp"
#include "tests/support/ThreadRanks.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;

const std::vector<int64_t> kSizes = {7, 40, 13};  // split unevenly over 2 and 3 ranks

float initial(size_t layer, int64_t k) {
  return std::cos(0.3f * k + layer);
}
float gradient(size_t layer, int64_t k, int rank) {
  return 0.1f * (rank + 1) * (k + layer + 1);
}

void checkOn(int size) {
  auto errors = test::errorsOnThreadRanks(size, 30s, [](ProcessGroup& group) {
    std::vector<Tensor> layers;
    for (size_t l = 0; l < kSizes.size(); ++l) {
      Tensor full = Tensor::empty({kSizes[l]}, ScalarType::Float32);
      for (int64_t k = 0; k < kSizes[l]; ++k) full.data<float>()[k] = initial(l, k);
      layers.push_back(full);
    }
    const double lr = 0.5;
    FullyShardedLayers fsdp(group, layers, OptimizerSpec::sgd(lr));
    const int n = group.size();
    int64_t total = 0, sharded = 0;
    for (int64_t s : kSizes) {
      total += s;
      sharded += (s + n - 1) / n;
    }
    // Shards of the parameters and of the gradients, nothing else yet.
    EXPECT_EQ(fsdp.residentBytes(), 2 * sizeof(float) * sharded);

    // Forward: each layer whole, the next one prefetched.
    for (size_t l = 0; l < kSizes.size(); ++l) {
      Tensor w = fsdp.gather(l, static_cast<int>(l + 1));
      ASSERT_EQ(w.numel(), kSizes[l]);
      for (int64_t k = 0; k < kSizes[l]; ++k) ASSERT_EQ(w.data<float>()[k], initial(l, k));
      fsdp.release(l);
    }
    // Backward: rank-dependent gradients, averaged into the shards.
    std::vector<Tensor> grads;
    for (size_t l = kSizes.size(); l-- > 0;) {
      fsdp.gather(l, static_cast<int>(l) - 1);
      Tensor g = Tensor::empty({kSizes[l]}, ScalarType::Float32);
      for (int64_t k = 0; k < kSizes[l]; ++k) g.data<float>()[k] = gradient(l, k, group.rank());
      fsdp.reduceGradient(l, g);
      grads.push_back(g);
      fsdp.release(l);
    }
    fsdp.step();
    // The next gather has every rank's update: initial - lr * mean over ranks of the gradients.
    for (size_t l = 0; l < kSizes.size(); ++l) {
      Tensor w = fsdp.gather(l);
      for (int64_t k = 0; k < kSizes[l]; ++k) {
        float mean = 0;
        for (int r = 0; r < n; ++r) mean += gradient(l, k, r) / n;
        ASSERT_NEAR(w.data<float>()[k], initial(l, k) - lr * mean, 1e-5) << "layer " << l;
      }
      fsdp.release(l);
    }
    // At most two layers were whole at once (one computing, one prefetched), plus the padded
    // gradients in flight: far below every layer whole.
    size_t largest = 0;
    for (int64_t s : kSizes) largest = std::max<size_t>(largest, ((s + n - 1) / n) * n);
    EXPECT_LE(fsdp.peakBytes(),
              2 * sizeof(float) * sharded + 3 * sizeof(float) * largest + sizeof(float) * total);
    EXPECT_THROW(fsdp.gather(kSizes.size()), InvalidArgument);
    EXPECT_THROW(fsdp.reduceGradient(0, Tensor::zeros({3}, ScalarType::Float32)), InvalidArgument);
  });
  for (int rank = 0; rank < size; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

TEST(FullyShardedTest, GathersReductionsAndStepsOnTwoAndThreeRanks) {
  checkOn(2);
  checkOn(3);
}

}  // namespace
}  // namespace c10d::inline v1
