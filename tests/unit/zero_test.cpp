// ZeroOptimizer against DataParallelOptimizer on the same gradients: the same parameters after
// several Adam steps, at about 1/N of the optimizer state, on ranks as threads.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "c10d/core/HostBlockCache.hpp"
#include "c10d/parallel/ZeroOptimizer.hpp"
#include "c10d/training/DataParallelOptimizer.hpp"
#include "tests/support/ThreadRanks.hpp"
#include "tests/support/TrainingParameters.hpp"

namespace c10d::inline v1 {
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

// What each stage keeps between steps, counted by the host allocator (both thread ranks
// together), beyond the framework's parameters and gradients: stage 2 its 1/N of the parameters,
// of the averaged gradients and of Adam's two buffers, nothing full-size; stage 1 also the
// reducer's full-size buckets.
size_t bytesKeptBetweenSteps(int stage, int64_t elements) {
  constexpr int kRanks = 2;
  std::atomic<size_t> base{0}, kept{0};
  auto& cache = detail::HostBlockCache::process();
  auto errors = test::errorsOnThreadRanks(kRanks, 60s, [&](ProcessGroup& group) {
    auto params = test::cosineParameters(std::vector<int64_t>(4, elements / 4),
                                         [](size_t i) { return "p" + std::to_string(i); });
    group.barrier()->wait();
    if (group.rank() == 0) base = cache.liveBytes();
    group.barrier()->wait();
    {
      ZeroOptimizer zero(group, params, OptimizerSpec::adam(0.01), {.stage = stage});
      for (int step = 0; step < 2; ++step) {
        produceGradients(params, group.rank(), step);
        for (size_t i = params.size(); i-- > 0;) zero.reducer().markGradReady(i);
        ASSERT_TRUE(zero.step());
      }
      group.barrier()->wait();
      if (group.rank() == 0) {
        // An op's worker may hold its finished work a moment after the step returned.
        std::this_thread::sleep_for(50ms);
        kept = cache.liveBytes() - base;
      }
      group.barrier()->wait();
    }
  });
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
  return kept;
}

TEST(ZeroOptimizerTest, Stage2KeepsOneNthOfTheGradientsAndNoFullSizeBuffer) {
  const int64_t elements = int64_t{1} << 20;  // 4 MiB of float32 per rank
  const size_t model = elements * sizeof(float);
  const size_t stage2 = bytesKeptBetweenSteps(2, elements);
  const size_t stage1 = bytesKeptBetweenSteps(1, elements);
  RecordProperty("stage2_bytes", std::to_string(stage2));
  RecordProperty("stage1_bytes", std::to_string(stage1));
  // Per rank: parameters, gradients and Adam's two buffers, each 1/2 of the model: 2 models.
  const size_t slack = 256 << 10;
  EXPECT_LE(stage2, 2 * 2 * model + slack) << "stage 2 keeps " << stage2 << " bytes";
  // Stage 1 adds each rank's full-size buckets.
  EXPECT_GE(stage1, stage2 + 2 * model - slack)
      << "stage 1 keeps " << stage1 << " bytes, stage 2 " << stage2;
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
}  // namespace c10d::inline v1
