// The reducer and the fusion queue with ranks as threads of one process, so ThreadSanitizer sees
// every access: several threads per rank mark gradients (or submit tensors) at once, as autograd
// engines' hooks do, while hooks launch the buckets (or the queue's thread runs its cycles),
// through the first backward's rebuild, a no-sync backward and findUnusedParameters.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/training/DistributedDataParallel.hpp"
#include "c10d/training/FusionQueue.hpp"
#include "tests/support/ThreadRanks.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;

constexpr int kRanks = 2;
constexpr int kParameters = 24;
constexpr int kMarkingThreads = 3;

float gradient(int rank, int k, int step) {
  return static_cast<float>((rank + 1) * 0.5 + k * 0.25 + step);
}

TEST(DataParallelThreads, ConcurrentMarksOnThreadRanksAverageCorrectly) {
  std::vector<std::string> errors = test::errorsOnThreadRanks(kRanks, 30s, [](ProcessGroup& group) {
    const int rank = group.rank();
    std::vector<Tensor> values, grads;
    std::vector<DataParallelParameter> parameters;
    for (int k = 0; k < kParameters; ++k) {
      values.push_back(Tensor::zeros({16 + k}, ScalarType::Float32));
      grads.push_back(Tensor::zeros({16 + k}, ScalarType::Float32));
      parameters.push_back({values[k], grads[k], ""});
    }
    DataParallelOptions options;
    options.firstBucketBytes = 256;
    options.bucketCapBytes = 512;
    options.findUnusedParameters = true;
    DistributedDataParallel ddp(group, parameters, options);
    for (int step = 0; step < 4; ++step) {
      auto scope = step == 1 ? std::make_unique<DistributedDataParallel::NoSync>(ddp) : nullptr;
      std::vector<std::thread> markers;
      for (int t = 0; t < kMarkingThreads; ++t) {
        markers.emplace_back([&, t] {
          for (int k = t; k < kParameters; k += kMarkingThreads) {
            float* g = grads[k].data<float>();
            // Step 1 accumulates; parameter 5 is unused on rank 1 in step 3.
            if (step == 3 && k == 5 && rank == 1) continue;
            for (int e = 0; e < grads[k].numel(); ++e) {
              g[e] = (step == 2 ? g[e] : 0.0f) + gradient(rank, k, step);
            }
            ddp.markGradReady(k);
          }
        });
      }
      for (auto& m : markers) m.join();
      scope.reset();
      ddp.finalizeBackward();
      if (step == 1) continue;
      for (int k = 0; k < kParameters; ++k) {
        double expected = 0;
        for (int r = 0; r < kRanks; ++r) {
          if (step == 3 && k == 5 && r == 1) continue;
          expected += gradient(r, k, step) + (step == 2 ? gradient(r, k, 1) : 0.0);
        }
        expected /= kRanks;
        float actual = grads[k].data<float>()[grads[k].numel() - 1];
        if (std::abs(actual - expected) > 1e-5 * expected) {
          throw std::runtime_error("step " + std::to_string(step) + " parameter " +
                                   std::to_string(k) + ": " + std::to_string(actual) +
                                   ", expected " + std::to_string(expected));
        }
      }
    }
  });
  EXPECT_EQ(errors, std::vector<std::string>(kRanks)) << errors[0] << " / " << errors[1];
}

TEST(FusionQueueThreads, ConcurrentSubmissionsOnThreadRanksReduceCorrectly) {
  std::vector<std::string> errors = test::errorsOnThreadRanks(kRanks, 30s, [](ProcessGroup& group) {
    const int rank = group.rank();
    FusionOptions options;
    options.cycleTime = std::chrono::microseconds(200);
    options.fusionThresholdBytes = 256;  // several fused buffers per cycle
    FusionQueue queue(group, options);
    for (int round = 0; round < 3; ++round) {
      std::vector<Tensor> tensors(kParameters);
      std::vector<std::shared_ptr<Future>> futures(kParameters);
      std::vector<std::thread> submitters;
      for (int t = 0; t < kMarkingThreads; ++t) {
        submitters.emplace_back([&, t] {
          for (int k = t; k < kParameters; k += kMarkingThreads) {
            tensors[k] = Tensor::empty({8 + k}, ScalarType::Float32);
            std::fill(tensors[k].data<float>(), tensors[k].data<float>() + 8 + k,
                      gradient(rank, k, round));
            futures[k] = queue.allreduce("t" + std::to_string(k), tensors[k], ReduceOp::SUM);
          }
        });
      }
      for (auto& s : submitters) s.join();
      for (int k = 0; k < kParameters; ++k) {
        futures[k]->wait(30s, "t" + std::to_string(k));
        float expected = gradient(0, k, round) + gradient(1, k, round);
        float actual = tensors[k].data<float>()[7];
        if (actual != expected) {
          throw std::runtime_error("round " + std::to_string(round) + " tensor " +
                                   std::to_string(k) + ": " + std::to_string(actual) +
                                   ", expected " + std::to_string(expected));
        }
      }
    }
    queue.shutdown();
  });
  EXPECT_EQ(errors, std::vector<std::string>(kRanks)) << errors[0] << " / " << errors[1];
}

}  // namespace
}  // namespace c10d::inline v1
