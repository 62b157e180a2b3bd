// ZeRO stages 1 and 2 (c10d::ZeroOptimizer) against plain data parallelism
// (DistributedDataParallel with DataParallelOptimizer), both with Adam, on a small MLP that every
// rank trains on its own data for 20 steps. The example checks that the sharded run's
// parameters equal the data-parallel run's after every step (1e-5 relative), prints the optimizer
// state each rank holds against the unsharded figure, and checks the traffic of stage 2: each
// bucket reduce-scattered and all-gathered once per step, padded to N equal parts.
//
//   c10drun --nproc-per-node 4 zero_sharded

#include <cstdio>

#include "c10d/parallel/ZeroOptimizer.hpp"
#include "c10d/training/DataParallelOptimizer.hpp"
#include "examples/ExampleUtils.hpp"
#include "examples/parallel/Dense.hpp"

using examples::Matrix;

namespace {

constexpr int kIn = 32, kHidden = 96, kOut = 16, kBatch = 24, kSteps = 20;
constexpr double kTolerance = 1e-5;

// y = relu(x W1) W2, mean squared error to a target; gradients written into g1, g2 in place
// (the optimizers hold tensors over their memory).
struct Mlp {
  Matrix w1 = examples::randomMatrix(kIn, kHidden, 1, 0.2f);
  Matrix w2 = examples::randomMatrix(kHidden, kOut, 2, 0.2f);
  Matrix g1{kIn, kHidden}, g2{kHidden, kOut};

  std::vector<c10d::DataParallelParameter> parameters() {
    return {{w1.tensor(), g1.tensor(), "w1"}, {w2.tensor(), g2.tensor(), "w2"}};
  }

  void backward(const Matrix& x, const Matrix& target) {
    const Matrix pre = examples::matmul(x, w1), hidden = examples::relu(pre);
    const Matrix y = examples::matmul(hidden, w2);
    Matrix dy;
    examples::meanSquaredError(y, target, y.v.size(), dy);
    const Matrix d2 = examples::matmul(hidden, dy, true, false);
    const Matrix dPre = examples::reluBackward(pre, examples::matmul(dy, w2, false, true));
    const Matrix d1 = examples::matmul(x, dPre, true, false);
    std::copy(d1.v.begin(), d1.v.end(), g1.v.begin());
    std::copy(d2.v.begin(), d2.v.end(), g2.v.begin());
  }
};

}  // namespace

int main() {
  return examples::runExample("zero_sharded", [](c10d::ProcessGroup& pg, examples::Checker& check) {
    const int rank = pg.rank(), ranks = pg.size();
    const c10d::OptimizerSpec adam = c10d::OptimizerSpec::adam(1e-2);
    // Small buckets, so that there are several and their parts split unevenly.
    const size_t firstBucket = 4096, bucketCap = 8192;
    for (int stage : {1, 2}) {
      Mlp sharded, plain;
      c10d::ZeroOptimizer zero(pg, sharded.parameters(), adam, {stage, firstBucket, bucketCap});
      c10d::DataParallelOptions buckets;
      buckets.firstBucketBytes = firstBucket;
      buckets.bucketCapBytes = bucketCap;
      c10d::DistributedDataParallel ddp(pg, plain.parameters(), buckets);
      c10d::DataParallelOptimizer reference(ddp, adam);
      double worst = 0;
      uint64_t scattered = 0, gathered = 0, allreduced = 0;
      for (int step = 0; step < kSteps; ++step) {
        const Matrix x = examples::randomMatrix(kBatch, kIn, 1000 * rank + step, 1.0f);
        const Matrix target = examples::randomMatrix(kBatch, kOut, 5000 + 1000 * rank + step, 1.0f);
        sharded.backward(x, target);
        plain.backward(x, target);
        pg.resetTraffic();
        for (size_t i = 2; i-- > 0;) zero.reducer().markGradReady(i);
        zero.step();
        for (const c10d::OpTraffic& t : pg.traffic()) {
          if (t.op == "reduce_scatter_tensor") scattered = t.bytes;
          if (t.op == "allgather_into_tensor") gathered = t.bytes;
          if (t.op == "allreduce") allreduced = t.bytes;  // the gradients (stage 1), the use counts
        }
        for (size_t i = 2; i-- > 0;) ddp.markGradReady(i);
        reference.step();
        worst = std::max({worst, examples::relativeDifference(sharded.w1, plain.w1),
                          examples::relativeDifference(sharded.w2, plain.w2)});
      }
      check.expect(worst <= kTolerance, "ZeRO-", stage,
                   ": parameters differ from data-parallel "
                   "Adam's by ",
                   worst);
      // Every bucket's part, padded: what one reduce-scatter and one all-gather move per step.
      uint64_t padded = 0;
      for (const auto& bucket : zero.reducer().bucketLayout()) {
        int64_t elements = 0;
        for (size_t i : bucket) elements += i == 0 ? kIn * kHidden : kHidden * kOut;
        padded += static_cast<uint64_t>((elements + ranks - 1) / ranks) * ranks * sizeof(float);
      }
      check.expect(gathered == padded && scattered == (stage == 2 ? padded : 0), "ZeRO-", stage,
                   ": counted ", scattered, " bytes reduce-scattered and ", gathered,
                   " all-gathered per step; the theory is ", stage == 2 ? padded : 0, " and ",
                   padded);
      // Adam's state of the whole model, as the data-parallel run holds it on every rank.
      const size_t unsharded = 2 * sizeof(float) * (kIn * kHidden + kHidden * kOut);
      auto states = c10d::Tensor::zeros({ranks}, c10d::ScalarType::Int64);
      states.data<int64_t>()[rank] = static_cast<int64_t>(zero.optimizerStateBytes());
      pg.allreduce(states)->wait();
      if (rank == 0) {
        std::string perRank;
        for (int r = 0; r < ranks; ++r) {
          perRank += (r ? " " : "") + std::to_string(states.data<int64_t>()[r]);
        }
        std::printf(
            "zero_sharded: ZeRO-%d on %d ranks, %d Adam steps: parameters within %.0e of "
            "data-parallel Adam's (worst %.1e); optimizer state per rank [%s] bytes, "
            "unsharded %zu (1/N = %zu); per step %llu bytes allreduced, %llu reduce-scattered, "
            "%llu all-gathered\n",
            stage, ranks, kSteps, kTolerance, worst, perRank.c_str(), unsharded, unsharded / ranks,
            static_cast<unsigned long long>(allreduced), static_cast<unsigned long long>(scattered),
            static_cast<unsigned long long>(gathered));
      }
    }
  });
}
