// PipelineRunner: the order of passes each schedule gives a stage, and steps on ranks as threads
// with tensors whose shape changes with the micro-batch.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "c10d/parallel/Pipeline.hpp"
#include "tests/support/ThreadRanks.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;

// Forwards minus backwards at the worst point: the activations a stage holds at once.
int peakInFlight(const std::vector<std::pair<int, bool>>& passes) {
  int now = 0, peak = 0;
  for (auto [micro, forward] : passes) peak = std::max(peak, now += forward ? 1 : -1);
  return peak;
}

TEST(PipelineTest, SchedulesRunEveryPassOnceAndBoundActivations) {
  const int stages = 4, micro = 6;
  for (int stage = 0; stage < stages; ++stage) {
    for (auto schedule : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB}) {
      auto passes = PipelineRunner::order(schedule, stage, stages, micro);
      ASSERT_EQ(passes.size(), 2u * micro);
      std::vector<int> forwards, backwards;
      for (auto [m, forward] : passes) (forward ? forwards : backwards).push_back(m);
      for (int m = 0; m < micro; ++m) {
        EXPECT_EQ(forwards[m], m);
        EXPECT_EQ(backwards[m], m);
        // A micro-batch's backward comes after its forward.
        auto f = std::find(passes.begin(), passes.end(), std::make_pair(m, true));
        auto b = std::find(passes.begin(), passes.end(), std::make_pair(m, false));
        EXPECT_LT(f, b);
      }
      EXPECT_EQ(peakInFlight(passes),
                schedule == PipelineSchedule::GPipe ? micro : std::min(stages - stage, micro));
    }
  }
  // The last stage alternates at once under 1F1B.
  auto last = PipelineRunner::order(PipelineSchedule::OneFOneB, 3, 4, 3);
  EXPECT_EQ(last, (std::vector<std::pair<int, bool>>{
                      {0, true}, {0, false}, {1, true}, {1, false}, {2, true}, {2, false}}));
  EXPECT_DOUBLE_EQ(PipelineRunner::theoreticalBubble(4, 8), 3.0 / 11);
}

// Stage s multiplies by w_s = s + 2; the loss is the sum of the last output, so every element of
// the first stage's input gradient is the product of the w's, whatever the shape.
TEST(PipelineTest, StepsCarryActivationsAndGradientsOfAnyShape) {
  const int stages = 4, micro = 5;
  const float product = 2.0f * 3 * 4 * 5;
  for (auto schedule : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB}) {
    auto errors = test::errorsOnThreadRanks(stages, 30s, [&](ProcessGroup& group) {
      const int stage = group.rank();
      const float w = static_cast<float>(stage + 2);
      std::map<int, Tensor> inputGrads;
      auto scaled = [](const Tensor& t, float by) {
        Tensor out = Tensor::empty(t.sizes(), ScalarType::Float32);
        for (int64_t i = 0; i < t.numel(); ++i) out.data<float>()[i] = t.data<float>()[i] * by;
        return out;
      };
      std::map<int, std::vector<int64_t>> shapes;
      PipelineStage work{
          [&](int m, const Tensor& in) {
            shapes[m] = in.sizes();
            return scaled(in, w);
          },
          [&](int m, const Tensor& outGrad) {
            Tensor grad = outGrad;
            if (!grad.defined()) {  // the last stage: d(sum of out)/d(out) is 1 everywhere
              grad = Tensor::empty(shapes[m], ScalarType::Float32);
              std::fill_n(grad.data<float>(), grad.numel(), 1.0f);
            }
            Tensor in = scaled(grad, w);
            inputGrads[m] = in;
            return in;
          }};
      PipelineRunner runner(group, work, PipelineOptions{schedule, micro});
      PipelineStepStats stats = runner.step([](int m) {
        Tensor x = Tensor::empty({m + 1, 2}, ScalarType::Float32);  // a shape per micro-batch
        for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i + m);
        return x;
      });
      if (stage == stages - 1) {
        ASSERT_EQ(stats.outputs.size(), static_cast<size_t>(micro));
        for (int m = 0; m < micro; ++m) {
          ASSERT_EQ(stats.outputs[m].sizes(), (std::vector<int64_t>{m + 1, 2}));
          for (int64_t i = 0; i < stats.outputs[m].numel(); ++i) {
            EXPECT_FLOAT_EQ(stats.outputs[m].data<float>()[i], product * static_cast<float>(i + m));
          }
        }
      }
      if (stage == 0) {
        for (int m = 0; m < micro; ++m) {
          ASSERT_EQ(inputGrads[m].numel(), 2 * (m + 1));
          for (int64_t i = 0; i < inputGrads[m].numel(); ++i) {
            EXPECT_FLOAT_EQ(inputGrads[m].data<float>()[i], product);
          }
        }
      }
      EXPECT_GT(stats.total.count(), 0);
      EXPECT_GE(stats.idleFraction(), 0);
    });
    for (int rank = 0; rank < stages; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
  }
}

TEST(PipelineTest, AStageWithoutFunctionsOrMicroBatchesIsRefused) {
  auto errors = test::errorsOnThreadRanks(2, 30s, [](ProcessGroup& group) {
    EXPECT_THROW(PipelineRunner(group, PipelineStage{}, PipelineOptions{}), InvalidArgument);
    PipelineStage stage{[](int, const Tensor& t) { return t; },
                        [](int, const Tensor& t) { return t; }};
    EXPECT_THROW(PipelineRunner(group, stage, PipelineOptions{.microBatches = 0}), InvalidArgument);
  });
  for (const std::string& error : errors) EXPECT_EQ(error, "");
}

}  // namespace
}  // namespace c10d::inline v1
