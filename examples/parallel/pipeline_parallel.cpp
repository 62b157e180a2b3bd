// Pipeline parallelism: a 4-layer MLP cut into one stage per rank, a batch cut into micro-batches
// that flow through the stages under the GPipe and 1F1B schedules (c10d::PipelineRunner). Every
// rank also computes the same model unpipelined on the whole batch, and the example checks, for
// three SGD steps of each schedule, that the loss and each stage's weight gradient equal the
// unpipelined ones within 1e-5 relative, that the bytes each stage sent are what the schedule
// sends in theory, and prints the measured idle fraction next to the bubble's (p-1)/(m+p-1).
//
//   c10drun --nproc-per-node 4 pipeline_parallel     (any number of stages works)

#include <chrono>
#include <cstdio>
#include <map>

#include "c10d/parallel/Pipeline.hpp"
#include "examples/ExampleUtils.hpp"
#include "examples/parallel/Dense.hpp"

using examples::Matrix;

namespace {

constexpr int kWidth = 256;  // features per layer
constexpr int kMicroBatches = 8;
constexpr int kMicroRows = 32;  // samples per micro-batch
constexpr int kBatch = kMicroBatches * kMicroRows;
constexpr int kSteps = 3;
constexpr float kLearningRate = 0.05f;
constexpr double kTolerance = 1e-5;

// The whole model, as one process computes it without a pipeline.
struct Reference {
  std::vector<Matrix> weights;
  std::vector<Matrix> grads;
  double loss = 0;

  void step(const Matrix& input, const Matrix& target) {
    const int layers = static_cast<int>(weights.size());
    std::vector<Matrix> inputs, pre;
    Matrix x = input;
    for (int s = 0; s < layers; ++s) {
      inputs.push_back(x);
      pre.push_back(examples::matmul(x, weights[s]));
      x = s < layers - 1 ? examples::relu(pre.back()) : pre.back();
    }
    Matrix grad;
    loss = examples::meanSquaredError(x, target, x.v.size(), grad);
    grads.assign(layers, Matrix());
    for (int s = layers - 1; s >= 0; --s) {
      Matrix dz = s < layers - 1 ? examples::reluBackward(pre[s], grad) : grad;
      grads[s] = examples::matmul(inputs[s], dz, true, false);
      grad = examples::matmul(dz, weights[s], false, true);
    }
  }
};

}  // namespace

int main() {
  return examples::runExample("pipeline_parallel", [](c10d::ProcessGroup& pg,
                                                      examples::Checker& check) {
    const int stage = pg.rank(), stages = pg.size();
    const bool last = stage == stages - 1;
    const Matrix input = examples::randomMatrix(kBatch, kWidth, 7, 1.0f);
    const Matrix target = examples::randomMatrix(kBatch, kWidth, 8, 0.5f);

    for (auto schedule : {c10d::PipelineSchedule::GPipe, c10d::PipelineSchedule::OneFOneB}) {
      const char* name = schedule == c10d::PipelineSchedule::GPipe ? "GPipe" : "1F1B";
      Reference reference;
      for (int s = 0; s < stages; ++s) {
        reference.weights.push_back(examples::randomMatrix(kWidth, kWidth, 100 + s, 0.15f));
      }
      Matrix weight = reference.weights[stage];

      // This stage's part: its weight, and per micro-batch what backward needs.
      std::map<int, Matrix> inputs, pre;
      Matrix weightGrad(kWidth, kWidth);
      double loss = 0;
      c10d::PipelineStage work{
          [&](int micro, const c10d::Tensor& in) {
            inputs[micro] = Matrix::fromTensor(in);
            pre[micro] = examples::matmul(inputs[micro], weight);
            return (last ? pre[micro] : examples::relu(pre[micro])).copy();
          },
          [&](int micro, const c10d::Tensor& outGrad) {
            Matrix grad;
            if (last) {  // the loss: mean squared error over the whole batch
              loss += examples::meanSquaredError(
                  pre[micro], examples::rowsOf(target, micro * kMicroRows, kMicroRows),
                  kBatch * kWidth, grad);
            } else {
              grad = examples::reluBackward(pre[micro], Matrix::fromTensor(outGrad));
            }
            examples::addInPlace(weightGrad, examples::matmul(inputs[micro], grad, true, false));
            return examples::matmul(grad, weight, false, true).copy();
          }};
      c10d::PipelineRunner runner(pg, work, c10d::PipelineOptions{schedule, kMicroBatches});

      double idle = 0;
      for (int step = 0; step < kSteps; ++step) {
        weightGrad = Matrix(kWidth, kWidth);
        loss = 0;
        pg.resetTraffic();
        c10d::PipelineStepStats stats = runner.step([&](int micro) {
          return examples::rowsOf(input, micro * kMicroRows, kMicroRows).copy();
        });
        idle += stats.idleFraction() / kSteps;
        reference.step(input, target);

        const double gradDiff = examples::relativeDifference(weightGrad, reference.grads[stage]);
        check.expect(gradDiff <= kTolerance, name, " step ", step, ": stage ", stage,
                     "'s weight gradient differs from the unpipelined one by ", gradDiff);
        if (last) {
          const double lossDiff = std::abs(loss - reference.loss) / reference.loss;
          check.expect(lossDiff <= kTolerance, name, " step ", step, ": loss ", loss,
                       " against the unpipelined ", reference.loss);
          if (step == kSteps - 1) {
            std::printf("%s: loss %.6f (unpipelined %.6f) after %d steps\n", name, loss,
                        reference.loss, kSteps);
          }
        }
        // Each transfer is a header of 10 int64 and a micro-batch of kMicroRows x kWidth floats.
        const uint64_t perTransfer = 10 * 8 + kMicroRows * kWidth * 4;
        const uint64_t sends = (last ? 0 : kMicroBatches) + (stage == 0 ? 0 : kMicroBatches);
        uint64_t sent = 0;
        for (const c10d::OpTraffic& t : pg.traffic()) sent += t.op == "send" ? t.bytes : 0;
        check.expect(sent == sends * perTransfer, name, ": stage ", stage, " sent ", sent,
                     " bytes, the schedule sends ", sends * perTransfer);

        examples::addInPlace(weight, weightGrad, -kLearningRate);
        for (int s = 0; s < stages; ++s) {
          examples::addInPlace(reference.weights[s], reference.grads[s], -kLearningRate);
        }
      }
      auto average = c10d::Tensor::zeros({1}, c10d::ScalarType::Float64);
      average.data<double>()[0] = idle / stages;
      pg.allreduce(average)->wait();
      if (stage == 0) {
        std::printf(
            "%s: %d stages, %d micro-batches: idle %.2f of each stage's step (mean), "
            "bubble in theory (p-1)/(m+p-1) = %.2f; gradients and loss within %.0e of the "
            "unpipelined model\n",
            name, stages, kMicroBatches, average.data<double>()[0],
            c10d::PipelineRunner::theoreticalBubble(stages, kMicroBatches), kTolerance);
      }
    }
  });
}
