// Data x tensor x pipeline parallelism together (c10d::ParallelLayout): a 2-stage model whose
// stages are Megatron MLP blocks split over the tensor group, run as a pipeline of micro-batches
// over the pipeline group (c10d::PipelineRunner), with replicas of the whole on the data group
// averaging their gradients. Every rank also computes the unparallelised model on every
// replica's batch, and the example checks, for two SGD steps, the loss and each weight share's
// gradient (1e-5 relative). Rank 0 prints the rank map.
//
//   c10drun --nproc-per-node 8 parallel_3d     (8: data 2 x tensor 2 x pipeline 2; 4 and 2
//                                              ranks drop data, then pipeline)

#include <cstdio>
#include <map>

#include "c10d/parallel/Layout.hpp"
#include "c10d/parallel/Pipeline.hpp"
#include "examples/ExampleUtils.hpp"
#include "examples/parallel/Blocks.hpp"

using examples::Matrix;

namespace {

constexpr int kModel = 32, kHidden = 64, kBatch = 8, kMicroBatches = 2, kSteps = 2;
constexpr int kMicroRows = kBatch / kMicroBatches;
constexpr float kLearningRate = 0.1f;
constexpr double kTolerance = 1e-5;

Matrix batchOf(int replica, int step) {
  return examples::randomMatrix(kBatch, kModel, 300 + 10 * replica + step, 1.0f);
}
Matrix targetOf(int replica, int step) {
  return examples::randomMatrix(kBatch, kModel, 900 + 10 * replica + step, 0.5f);
}

// The unparallelised model: stage s is relu(x A_s) B_s; mean squared error over the batch.
struct Whole {
  std::vector<Matrix> a, b, gradA, gradB;
  double loss = 0;

  // Gradients averaged over every replica's batch, as data parallelism computes them.
  void step(int replicas, int step) {
    const int stages = static_cast<int>(a.size());
    gradA.assign(stages, Matrix(kModel, kHidden));
    gradB.assign(stages, Matrix(kHidden, kModel));
    loss = 0;
    for (int d = 0; d < replicas; ++d) {
      std::vector<Matrix> inputs;
      Matrix x = batchOf(d, step);
      for (int s = 0; s < stages; ++s) {
        inputs.push_back(x);
        x = examples::matmul(examples::relu(examples::matmul(x, a[s])), b[s]);
      }
      const Matrix target = targetOf(d, step);
      Matrix grad;
      loss += examples::meanSquaredError(x, target, x.v.size(), grad) / replicas;
      for (int s = stages - 1; s >= 0; --s) {
        examples::MlpPass pass = examples::mlpPass(inputs[s], a[s], b[s], grad);
        examples::addInPlace(gradA[s], pass.gradA, 1.0f / replicas);
        examples::addInPlace(gradB[s], pass.gradB, 1.0f / replicas);
        grad = pass.inputGrad;
      }
    }
  }
};

}  // namespace

int main() {
  return examples::runExample("parallel_3d", [](c10d::ProcessGroup& world,
                                                examples::Checker& check) {
    const int n = world.size();
    const c10d::ParallelSizes sizes{n / ((n % 2 == 0 ? 2 : 1) * (n % 4 == 0 ? 2 : 1)),
                                    n % 2 == 0 ? 2 : 1, n % 4 == 0 ? 2 : 1};
    c10d::ParallelLayout layout(world, sizes);
    if (world.rank() == 0) {
      std::printf("parallel_3d: data %d x tensor %d x pipeline %d\n%s", sizes.data, sizes.tensor,
                  sizes.pipeline, c10d::ParallelLayout::describe(sizes).c_str());
    }
    const c10d::ParallelCoordinates at = layout.coordinates();
    const int stages = sizes.pipeline, stage = at.pipeline, share = kHidden / sizes.tensor;
    const bool last = stage == stages - 1;

    Whole whole;
    for (int s = 0; s < stages; ++s) {
      whole.a.push_back(examples::randomMatrix(kModel, kHidden, 10 + s, 0.3f));
      whole.b.push_back(examples::randomMatrix(kHidden, kModel, 20 + s, 0.3f));
    }
    // This rank's shares: A's columns and B's rows of its tensor rank, in its stage.
    Matrix a = examples::colsOf(whole.a[stage], at.tensor * share, share);
    Matrix b = examples::rowsOf(whole.b[stage], at.tensor * share, share);

    for (int step = 0; step < kSteps; ++step) {
      const Matrix batch = batchOf(at.data, step), target = targetOf(at.data, step);
      Matrix gradA(kModel, share), gradB(share, kModel);
      std::map<int, Matrix> inputs, outputs;
      double loss = 0;
      auto sumOverTensorGroup = [&](Matrix& m) { layout.tensor().allreduce(m.tensor())->wait(); };
      c10d::PipelineStage work{
          [&](int micro, const c10d::Tensor& in) {
            inputs[micro] = Matrix::fromTensor(in);
            Matrix out = examples::matmul(examples::relu(examples::matmul(inputs[micro], a)), b);
            sumOverTensorGroup(out);  // the row-parallel layer's partial sums
            outputs[micro] = out;
            return out.copy();
          },
          [&](int micro, const c10d::Tensor& outGrad) {
            Matrix grad;
            if (last) {
              loss += examples::meanSquaredError(
                  outputs[micro], examples::rowsOf(target, micro * kMicroRows, kMicroRows),
                  kBatch * kModel, grad);
            } else {
              grad = Matrix::fromTensor(outGrad);
            }
            // The forward again (activations recomputed), then this share's gradients.
            examples::MlpPass pass = examples::mlpPass(inputs[micro], a, b, grad);
            examples::addInPlace(gradA, pass.gradA);
            examples::addInPlace(gradB, pass.gradB);
            sumOverTensorGroup(pass.inputGrad);  // the column-parallel layer's partial sums
            return pass.inputGrad.copy();
          }};
      c10d::PipelineRunner runner(
          layout.pipeline(), work,
          c10d::PipelineOptions{c10d::PipelineSchedule::OneFOneB, kMicroBatches});
      runner.step([&](int micro) {
        return examples::rowsOf(batch, micro * kMicroRows, kMicroRows).copy();
      });
      // Data parallelism: the replicas average their gradients (and the loss, for the check).
      layout.data().allreduce(gradA.tensor(), {.reduceOp = c10d::ReduceOp::AVG})->wait();
      layout.data().allreduce(gradB.tensor(), {.reduceOp = c10d::ReduceOp::AVG})->wait();
      auto replicaLoss = c10d::Tensor::zeros({1}, c10d::ScalarType::Float64);
      replicaLoss.data<double>()[0] = loss;
      layout.data().allreduce(replicaLoss, {.reduceOp = c10d::ReduceOp::AVG})->wait();

      whole.step(sizes.data, step);
      const double diffA = examples::relativeDifference(
          gradA, examples::colsOf(whole.gradA[stage], at.tensor * share, share));
      const double diffB = examples::relativeDifference(
          gradB, examples::rowsOf(whole.gradB[stage], at.tensor * share, share));
      check.expect(diffA <= kTolerance && diffB <= kTolerance, "step ", step,
                   ": the gradients of "
                   "A's and B's shares differ from the unparallelised model's by ",
                   diffA, " and ", diffB);
      if (last) {
        const double lossDiff = std::abs(replicaLoss.data<double>()[0] - whole.loss) / whole.loss;
        check.expect(lossDiff <= kTolerance, "step ", step, ": loss ",
                     replicaLoss.data<double>()[0], " against the unparallelised ", whole.loss);
        if (at.data == 0 && at.tensor == 0 && step == kSteps - 1) {
          std::printf(
              "parallel_3d: loss %.6f (unparallelised %.6f) after %d steps; every weight "
              "share's gradient within %.0e\n",
              replicaLoss.data<double>()[0], whole.loss, kSteps, kTolerance);
        }
      }
      examples::addInPlace(a, gradA, -kLearningRate);
      examples::addInPlace(b, gradB, -kLearningRate);
      for (int s = 0; s < stages; ++s) {
        examples::addInPlace(whole.a[s], whole.gradA[s], -kLearningRate);
        examples::addInPlace(whole.b[s], whole.gradB[s], -kLearningRate);
      }
    }
  });
}
