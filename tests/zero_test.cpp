// ZeroOptimizer against DataParallelOptimizer on the same gradients: the same parameters after
// several Adam steps, at about 1/N of the optimizer state, on ranks as threads.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "c10d/parallel/ZeroOptimizer.hpp"
#include "c10d/training/DataParallelOptimizer.hpp"
#include "tests/support/ThreadRanks.hpp"
#include "tests/support/TrainingParameters.hpp"

namespace c10d::inline v0 {
namespace {

using namespace std::chrono_literals;

// Sizes that split unevenly over 2 and 3 ranks and, with small buckets, over several buckets.
const std::vector<int64_t> kSizes = {5, 7, 300, 33, 64};

std::vector<DataParallelParameter> makeParameters() {
  return test::cosineParameters(kSizes, [](size_t i) { return "p" + std::to_string(i); });
}

// Rank- and step-dependent gradients, the same for both optimizers.
void produceGradients(std::vector<DataParallelParameter>& params, int rank, int step) {
  for (size_t i = 0; i < params.size(); ++i) {
    float* g = params[i].grad.data<float>();
    for (int64_t k = 0; k < params[i].grad.numel(); ++k) {
      g[k] = std::sin(0.37f * k + 1.3f * rank + 0.7f * step + i);
    }
  }
}

void runAgainstDataParallel(int stage, int size) {
  auto errors = test::errorsOnThreadRanks(size, 30s, [stage](ProcessGroup& group) {
    auto zeroParams = makeParameters(), refParams = makeParameters();
    const OptimizerSpec adam = OptimizerSpec::adam(0.01);
    ZeroOptions options{stage, 64, 512};
    ZeroOptimizer zero(group, zeroParams, adam, options);
    DistributedDataParallel ref(group, refParams,
                                DataParallelOptions{.firstBucketBytes = 64, .bucketCapBytes = 512});
    DataParallelOptimizer refOptimizer(ref, adam);
    for (int step = 0; step < 5; ++step) {
      produceGradients(zeroParams, group.rank(), step);
      produceGradients(refParams, group.rank(), step);
      for (size_t i = kSizes.size(); i-- > 0;) {
        zero.reducer().markGradReady(i);
        ref.markGradReady(i);
      }
      ASSERT_TRUE(zero.step());
      ASSERT_TRUE(refOptimizer.step());
    }
    for (size_t i = 0; i < kSizes.size(); ++i) {
      for (int64_t k = 0; k < kSizes[i]; ++k) {
        const float got = zeroParams[i].value.data<float>()[k];
        const float want = refParams[i].value.data<float>()[k];
        ASSERT_NEAR(got, want, 1e-6f * std::max(1.0f, std::abs(want)))
            << "stage " << stage << ", parameter " << i << " element " << k;
      }
    }
    // Adam keeps two buffers per element: this rank's parts only, padding included.
    int64_t total = 0;
    for (int64_t n : kSizes) total += n;
    const size_t unsharded = 2 * sizeof(float) * static_cast<size_t>(total);
    const size_t buckets = zero.reducer().bucketLayout().size();
    EXPECT_LE(zero.optimizerStateBytes(),
              unsharded / group.size() + 2 * sizeof(float) * buckets * group.size())
        << "stage " << stage;
    EXPECT_GT(zero.shardElements(), 0);
  });
  for (int rank = 0; rank < size; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

TEST(ZeroOptimizerTest, Stage1MatchesDataParallelAdamOnTwoAndThreeRanks) {
  runAgainstDataParallel(1, 2);
  runAgainstDataParallel(1, 3);
}

TEST(ZeroOptimizerTest, Stage2MatchesDataParallelAdamOnTwoAndThreeRanks) {
  runAgainstDataParallel(2, 2);
  runAgainstDataParallel(2, 3);
}

TEST(ZeroOptimizerTest, RefusesStage3AndParametersWithoutGradients) {
  auto errors = test::errorsOnThreadRanks(2, 30s, [](ProcessGroup& group) {
    EXPECT_THROW(ZeroOptimizer(group, makeParameters(), OptimizerSpec::sgd(0.1), {.stage = 3}),
                 InvalidArgument);
    auto params = makeParameters();
    params[1].grad = Tensor();
    EXPECT_THROW(ZeroOptimizer(group, params, OptimizerSpec::sgd(0.1)), InvalidArgument);
  });
  for (const std::string& error : errors) EXPECT_EQ(error, "");
}

}  // namespace
}  // namespace c10d::inline v0
