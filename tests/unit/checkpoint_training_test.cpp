// The library's pieces in checkpoints, on ranks as threads: ZeRO-2 with Adam saved at 4 ranks
// continues at 1 to 5 ranks, and in an unsharded Adam, as the unsharded Adam does from the same
// checkpoint; FullyShardedLayers loads at every world size and whole; a 4-stage pipeline's
// parameters load into 1 to 5 stages; a sampler resumed at another world size sees every remaining
// sample of its epoch once.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "c10d/checkpoint/Checkpoint.hpp"
#include "c10d/checkpoint/Metadata.hpp"
#include "c10d/parallel/FullySharded.hpp"
#include "c10d/parallel/Pipeline.hpp"
#include "c10d/parallel/ZeroOptimizer.hpp"
#include "c10d/training/DataParallelOptimizer.hpp"
#include "c10d/training/DistributedSampler.hpp"
#include "tests/support/TempDir.hpp"
#include "tests/support/ThreadRanks.hpp"
#include "tests/support/TrainingParameters.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

using test::TempDir;

// Sizes that split unevenly over 2, 3 and 5 ranks and, with small buckets, over several buckets.
const std::vector<int64_t> kSizes = {5, 7, 300, 33, 64};

std::vector<DataParallelParameter> makeParameters() {
  return test::cosineParameters(kSizes,
                                [](size_t i) { return "layer" + std::to_string(i) + ".weight"; });
}

// The same on every rank, and a multiple of 1/64 below 2: averaging it over 1, 2 or 4 ranks is
// exact, so those runs must match the unsharded Adam bit for bit.
void produceGradients(std::vector<DataParallelParameter>& params, int step) {
  for (size_t i = 0; i < params.size(); ++i) {
    float* g = params[i].grad.data<float>();
    for (int64_t k = 0; k < params[i].grad.numel(); ++k) {
      g[k] = static_cast<float>((k * 7 + step * 13 + static_cast<int64_t>(i) * 5) % 128 - 64) / 64;
    }
  }
}

constexpr ZeroOptions kZero{2, 64, 512};

// Steps a ZeroOptimizer (or, with unsharded, a DataParallelOptimizer) from the checkpoint at dir
// (none: from the start) for steps steps; returns the parameters.
std::vector<std::vector<float>> train(ProcessGroup& group, bool unsharded, const std::string& from,
                                      int firstStep, int steps, const std::string& saveTo = "") {
  auto params = makeParameters();
  const OptimizerSpec adam = OptimizerSpec::adam(0.01);
  std::unique_ptr<ZeroOptimizer> zero;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<DataParallelOptimizer> plain;
  auto state = std::make_unique<checkpoint::State>();
  if (unsharded) {
    ddp = std::make_unique<DistributedDataParallel>(
        group, params, DataParallelOptions{.firstBucketBytes = 64, .bucketCapBytes = 512});
    plain = std::make_unique<DataParallelOptimizer>(*ddp, adam);
    plain->addToState(*state, "model.");
  } else {
    zero = std::make_unique<ZeroOptimizer>(group, params, adam, kZero);
    zero->addToState(*state, "model.");
  }
  state->setInt("step", firstStep);
  if (!from.empty()) checkpoint::load(*state, from, &group);
  EXPECT_EQ(state->getInt("step"), firstStep);
  for (int step = firstStep; step < firstStep + steps; ++step) {
    produceGradients(params, step);
    for (size_t i = kSizes.size(); i-- > 0;) {
      unsharded ? ddp->markGradReady(i) : zero->reducer().markGradReady(i);
    }
    EXPECT_TRUE(unsharded ? plain->step() : zero->step());
  }
  if (!saveTo.empty()) {
    state->setInt("step", firstStep + steps);
    checkpoint::save(*state, saveTo, &group);
  }
  std::vector<std::vector<float>> out;
  for (const auto& p : params) {
    out.emplace_back(p.value.data<float>(), p.value.data<float>() + p.value.numel());
  }
  return out;
}

TEST(CheckpointTraining, ZeroSavedAtFourContinuesAtAnyWorldSizeAsUnshardedAdam) {
  TempDir tmp;
  auto errors = test::errorsOnThreadRanks(
      4, 60s, [&](ProcessGroup& group) { train(group, false, "", 0, 3, tmp / "step-3"); });
  for (int r = 0; r < 4; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  // Six steps without a break: what every resumed run must reach.
  std::vector<std::vector<float>> uninterrupted;
  errors = test::errorsOnThreadRanks(4, 60s, [&](ProcessGroup& group) {
    auto params = train(group, false, "", 0, 6);
    if (group.rank() == 0) uninterrupted = params;
  });
  for (int r = 0; r < 4; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;

  std::vector<std::vector<float>> reference;
  errors = test::errorsOnThreadRanks(
      1, 60s, [&](ProcessGroup& group) { reference = train(group, true, tmp / "step-3", 3, 3); });
  ASSERT_EQ(errors[0], "");
  for (size_t i = 0; i < kSizes.size(); ++i) {
    ASSERT_EQ(reference[i], uninterrupted[i]) << "the unsharded Adam resumed, parameter " << i;
  }
  for (int size = 1; size <= 5; ++size) {
    std::vector<std::vector<std::vector<float>>> got(size);
    errors = test::errorsOnThreadRanks(size, 60s, [&](ProcessGroup& group) {
      got[group.rank()] = train(group, false, tmp / "step-3", 3, 3);
    });
    for (int r = 0; r < size; ++r) ASSERT_EQ(errors[r], "") << size << " ranks, rank " << r;
    const bool exact = size == 1 || size == 2 || size == 4;
    for (size_t i = 0; i < kSizes.size(); ++i) {
      for (int64_t k = 0; k < kSizes[i]; ++k) {
        const float want = reference[i][k];
        const float have = got[size - 1][i][k];
        if (exact) {
          ASSERT_EQ(have, want) << size << " ranks, parameter " << i << " element " << k;
        } else {
          // 1/3 and 1/5 of a gradient round: the averages differ in their last bits.
          ASSERT_NEAR(have, want, 1e-6f * std::max(1.0f, std::abs(want)))
              << size << " ranks, parameter " << i << " element " << k;
        }
      }
    }
  }
  // And the unsharded Adam's own checkpoint continues in ZeRO at 3 ranks.
  errors = test::errorsOnThreadRanks(1, 60s, [&](ProcessGroup& group) {
    train(group, true, tmp / "step-3", 3, 1, tmp / "plain-4");
  });
  ASSERT_EQ(errors[0], "");
  errors = test::errorsOnThreadRanks(
      3, 60s, [&](ProcessGroup& group) { train(group, false, tmp / "plain-4", 4, 1); });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(CheckpointTraining, FullyShardedLayersLoadAtEveryWorldSizeAndWhole) {
  TempDir tmp;
  const std::vector<int64_t> elements = {10, 37, 3};
  auto layersOf = [&](float offset) {
    std::vector<Tensor> layers;
    for (size_t l = 0; l < elements.size(); ++l) {
      Tensor t = Tensor::empty({elements[l]}, ScalarType::Float64);
      for (int64_t k = 0; k < elements[l]; ++k) t.data<double>()[k] = offset + 100.0 * l + k;
      layers.push_back(t);
    }
    return layers;
  };
  // Two SGD-with-momentum steps at 4 ranks, then saved.
  std::vector<Tensor> afterSteps;
  auto errors = test::errorsOnThreadRanks(4, 60s, [&](ProcessGroup& group) {
    FullyShardedLayers fsdp(group, layersOf(0), OptimizerSpec::sgd(0.5, 0.9));
    for (int step = 0; step < 2; ++step) {
      for (size_t l = elements.size(); l-- > 0;) {
        Tensor w = fsdp.gather(l);
        Tensor g = Tensor::empty({elements[l]}, ScalarType::Float64);
        for (int64_t k = 0; k < elements[l]; ++k) g.data<double>()[k] = 0.25 * (k % 4);
        fsdp.reduceGradient(l, g);
        fsdp.release(l);
      }
      fsdp.step();
    }
    checkpoint::State state;
    fsdp.addToState(state);
    checkpoint::save(state, tmp / "fsdp", &group);
    if (group.rank() == 0) {
      for (size_t l = 0; l < elements.size(); ++l) {
        Tensor w = fsdp.gather(l);
        Tensor copy = Tensor::empty({elements[l]}, ScalarType::Float64);
        std::memcpy(copy.data(), w.data(), w.nbytes());
        afterSteps.push_back(copy);
        fsdp.release(l);
      }
    } else {
      for (size_t l = 0; l < elements.size(); ++l) {
        fsdp.gather(l);
        fsdp.release(l);
      }
    }
  });
  for (int r = 0; r < 4; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  for (int size = 1; size <= 5; ++size) {
    errors = test::errorsOnThreadRanks(size, 60s, [&](ProcessGroup& group) {
      FullyShardedLayers fsdp(group, layersOf(-1000), OptimizerSpec::sgd(0.5, 0.9));
      checkpoint::State state;
      fsdp.addToState(state);
      checkpoint::load(state, tmp / "fsdp", &group);
      for (size_t l = 0; l < elements.size(); ++l) {
        Tensor w = fsdp.gather(l);
        for (int64_t k = 0; k < elements[l]; ++k) {
          ASSERT_EQ(w.data<double>()[k], afterSteps[l].data<double>()[k])
              << size << " ranks, layer " << l << " element " << k;
        }
        fsdp.release(l);
      }
    });
    for (int r = 0; r < size; ++r) EXPECT_EQ(errors[r], "") << size << " ranks, rank " << r;
  }
  // Whole, in a program without FSDP: the layers and their momentum.
  checkpoint::State whole;
  std::vector<Tensor> layers = layersOf(0), momentum;
  for (size_t l = 0; l < elements.size(); ++l) {
    whole.add("layer" + std::to_string(l), layers[l]);
    momentum.push_back(Tensor::zeros({elements[l]}, ScalarType::Float64));
    whole.add("optim.layer" + std::to_string(l) + ".momentum_buffer", momentum[l]);
    whole.add("optim.layer" + std::to_string(l) + ".step", Tensor::zeros({}, ScalarType::Int64));
  }
  checkpoint::load(whole, tmp / "fsdp");
  for (size_t l = 0; l < elements.size(); ++l) {
    EXPECT_EQ(std::memcmp(layers[l].data(), afterSteps[l].data(), layers[l].nbytes()), 0);
    EXPECT_EQ(momentum[l].data<double>()[1], 0.25 * 1.9)
        << "layer " << l;  // 0.25, then 0.9x + 0.25
  }
}

TEST(CheckpointTraining, FourPipelineStagesLoadIntoOneToFiveStages) {
  TempDir tmp;
  auto layer = [](int l, float fill) {
    Tensor t = Tensor::empty({3, 4}, ScalarType::Float32);
    for (int k = 0; k < 12; ++k) t.data<float>()[k] = fill * (l * 12 + k);
    return t;
  };
  auto stageWith = [&](int first, int count, float fill) {
    PipelineStage stage;
    stage.forward = [](int, const Tensor& x) { return x; };
    stage.backward = [](int, const Tensor& g) { return g; };
    for (int l = first; l < first + count; ++l) {
      stage.parameters.push_back({"layers." + std::to_string(l) + ".weight", layer(l, fill)});
    }
    return stage;
  };
  auto errors = test::errorsOnThreadRanks(4, 60s, [&](ProcessGroup& group) {
    PipelineRunner runner(group, stageWith(group.rank(), 1, 1), {});
    checkpoint::State state;
    runner.addToState(state);
    checkpoint::save(state, tmp / "pipe", &group, {.layout = "pipeline=4"});
  });
  for (int r = 0; r < 4; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  // 4 layers over 1 to 5 stages: stage s holds layers [s * ceil(4 / S), ...), the fifth none.
  for (int stages = 1; stages <= 5; ++stages) {
    errors = test::errorsOnThreadRanks(stages, 60s, [&](ProcessGroup& group) {
      const int part = (4 + stages - 1) / stages;
      const int first = std::min(4, group.rank() * part);
      PipelineStage stage = stageWith(first, std::min(4, first + part) - first, 0);
      PipelineRunner runner(group, stage, {});
      checkpoint::State state;
      runner.addToState(state);
      checkpoint::load(state, tmp / "pipe", &group);
      for (const auto& [name, tensor] : stage.parameters) {
        const int l = std::stoi(name.substr(7));
        for (int k = 0; k < 12; ++k) ASSERT_EQ(tensor.data<float>()[k], l * 12 + k) << name;
      }
    });
    for (int r = 0; r < stages; ++r) EXPECT_EQ(errors[r], "") << stages << " stages, rank " << r;
  }
  EXPECT_EQ(checkpoint::readMetadata(tmp / "pipe").layout, "pipeline=4");
}

// 4 ranks take 5 samples each of a 50-sample epoch, save, and 3 ranks resume: together they see
// the other 30 exactly once (and 0 of the first 20), padded to equal shares.
TEST(CheckpointTraining, SamplerResumesAtAnotherWorldSizeWithEverySampleOnce) {
  TempDir tmp;
  std::set<int64_t> taken;
  auto errors = test::errorsOnThreadRanks(4, 60s, [&](ProcessGroup& group) {
    DistributedSampler sampler(50, 4, group.rank(), {.seed = 7});
    sampler.setEpoch(3);
    checkpoint::State state;
    sampler.addToState(state, "sampler.", 5);
    checkpoint::save(state, tmp / "sampler", &group);
  });
  for (int r = 0; r < 4; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  for (int r = 0; r < 4; ++r) {
    DistributedSampler sampler(50, 4, r, {.seed = 7});
    sampler.setEpoch(3);
    auto mine = sampler.indices();
    taken.insert(mine.begin(), mine.begin() + 5);
  }
  std::vector<std::vector<int64_t>> rest(3);
  errors = test::errorsOnThreadRanks(3, 60s, [&](ProcessGroup& group) {
    DistributedSampler sampler(50, 3, group.rank(), {.seed = 0});
    checkpoint::State state;
    sampler.addToState(state, "sampler.", 0);
    checkpoint::load(state, tmp / "sampler", &group);
    EXPECT_EQ(sampler.epoch(), 3u);
    EXPECT_EQ(sampler.startIndex(), 20);
    rest[group.rank()] = sampler.indices();
  });
  for (int r = 0; r < 3; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  std::multiset<int64_t> seen;
  for (const auto& mine : rest) {
    EXPECT_EQ(mine.size(), 10u);
    seen.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(taken.size(), 20u);
  for (int64_t i = 0; i < 50; ++i) {
    EXPECT_EQ(seen.count(i), taken.count(i) ? 0u : 1u) << "sample " << i;
  }
}

}  // namespace
}  // namespace c10d::inline v1
