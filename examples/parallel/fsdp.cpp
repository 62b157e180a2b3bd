// Fully sharded data parallelism (ZeRO-3 / FSDP, c10d::FullyShardedLayers): a 4-layer MLP whose
// layers each rank stores as 1/N shards. A layer is all-gathered just before its forward and
// again before its backward (the next one prefetched meanwhile), and its gradient
// reduce-scattered as its backward ends; Adam steps the shards. Every rank also trains the
// unsharded model on all ranks' batches (the average gradient, computed locally), and the
// example checks the loss and every layer after each of 5 steps (1e-5 relative), and prints the
// memory a rank held at its peak against the unsharded model's parameters, gradients and state.
//
//   c10drun --nproc-per-node 4 fsdp

#include <cstdio>

#include "c10d/parallel/FullySharded.hpp"
#include "examples/ExampleUtils.hpp"
#include "examples/parallel/Dense.hpp"

using examples::Matrix;

namespace {

constexpr int kWidth = 64, kLayers = 4, kBatch = 16, kSteps = 5;
constexpr double kTolerance = 1e-5;

Matrix batchOf(int rank, int step) {
  return examples::randomMatrix(kBatch, kWidth, 100 * rank + step, 1.0f);
}
Matrix targetOf(int rank, int step) {
  return examples::randomMatrix(kBatch, kWidth, 7000 + 100 * rank + step, 0.5f);
}

// One forward and backward of the MLP (ReLU between layers) with mean squared error: the loss,
// and each layer's weight gradient.
double forwardBackward(const std::vector<Matrix>& weights, const Matrix& x, const Matrix& target,
                       std::vector<Matrix>& grads) {
  std::vector<Matrix> inputs, pre;
  Matrix h = x;
  for (int l = 0; l < kLayers; ++l) {
    inputs.push_back(h);
    pre.push_back(examples::matmul(h, weights[l]));
    h = l < kLayers - 1 ? examples::relu(pre.back()) : pre.back();
  }
  Matrix grad;
  const double loss = examples::meanSquaredError(h, target, h.v.size(), grad);
  grads.assign(kLayers, Matrix());
  for (int l = kLayers - 1; l >= 0; --l) {
    Matrix dz = l < kLayers - 1 ? examples::reluBackward(pre[l], grad) : grad;
    grads[l] = examples::matmul(inputs[l], dz, true, false);
    grad = examples::matmul(dz, weights[l], false, true);
  }
  return loss;
}

Matrix asMatrix(const c10d::Tensor& flat) {
  Matrix m(kWidth, kWidth);
  std::copy_n(flat.data<float>(), flat.numel(), m.v.begin());
  return m;
}

}  // namespace

int main() {
  return examples::runExample("fsdp", [](c10d::ProcessGroup& pg, examples::Checker& check) {
    const int rank = pg.rank(), ranks = pg.size();
    const c10d::OptimizerSpec adam = c10d::OptimizerSpec::adam(1e-2);
    std::vector<Matrix> reference;
    std::vector<c10d::Tensor> initial;
    for (int l = 0; l < kLayers; ++l) {
      reference.push_back(examples::randomMatrix(kWidth, kWidth, 10 + l, 0.25f));
      initial.push_back(c10d::Tensor::fromBlob(reference.back().v.data(), c10d::ScalarType::Float32,
                                               {kWidth * kWidth}));
    }
    c10d::FullyShardedLayers fsdp(pg, initial, adam);
    auto referenceOptimizer = c10d::makeOptimizer(adam);
    double worst = 0;
    uint64_t gathered = 0, scattered = 0;
    for (int step = 0; step < kSteps; ++step) {
      // Sharded: gather each layer for forward, again for backward, reduce its gradient.
      const Matrix x = batchOf(rank, step), target = targetOf(rank, step);
      pg.resetTraffic();
      std::vector<Matrix> inputs, pre;
      Matrix h = x;
      for (int l = 0; l < kLayers; ++l) {
        const Matrix w = asMatrix(fsdp.gather(l, l + 1));
        inputs.push_back(h);
        pre.push_back(examples::matmul(h, w));
        h = l < kLayers - 1 ? examples::relu(pre.back()) : pre.back();
        fsdp.release(l);
      }
      Matrix grad;
      const double loss = examples::meanSquaredError(h, target, h.v.size(), grad);
      for (int l = kLayers - 1; l >= 0; --l) {
        const Matrix w = asMatrix(fsdp.gather(l, l - 1));
        Matrix dz = l < kLayers - 1 ? examples::reluBackward(pre[l], grad) : grad;
        Matrix dw = examples::matmul(inputs[l], dz, true, false);
        grad = examples::matmul(dz, w, false, true);
        fsdp.reduceGradient(l, dw.tensor());  // copied, then averaged in the background
        fsdp.release(l);
      }
      fsdp.step();  // waits for every reduction, then steps the shards
      // Each layer gathered twice (forward, backward) and its gradient reduce-scattered once; a
      // layer of 64 x 64 floats splits evenly, so nothing is padded.
      const uint64_t layerBytes = kWidth * kWidth * sizeof(float);
      for (const c10d::OpTraffic& t : pg.traffic()) {
        if (t.op == "allgather_into_tensor") gathered = t.bytes;
        if (t.op == "reduce_scatter_tensor") scattered = t.bytes;
      }
      check.expect(gathered == 2 * kLayers * layerBytes && scattered == kLayers * layerBytes,
                   "step ", step, ": counted ", gathered, " bytes gathered and ", scattered,
                   " reduce-scattered; the theory is ", 2 * kLayers * layerBytes, " and ",
                   kLayers * layerBytes);

      // Unsharded: every rank's batch here, gradients averaged locally, the same Adam.
      std::vector<Matrix> mean(kLayers, Matrix(kWidth, kWidth)), grads;
      double referenceLoss = 0;
      for (int r = 0; r < ranks; ++r) {
        referenceLoss +=
            forwardBackward(reference, batchOf(r, step), targetOf(r, step), grads) / ranks;
        for (int l = 0; l < kLayers; ++l) examples::addInPlace(mean[l], grads[l], 1.0f / ranks);
      }
      std::vector<c10d::Tensor> params, meanGrads;
      for (int l = 0; l < kLayers; ++l) {
        params.push_back(reference[l].tensor());
        meanGrads.push_back(mean[l].tensor());
      }
      referenceOptimizer->step(params, meanGrads);

      auto losses = c10d::Tensor::zeros({1}, c10d::ScalarType::Float64);
      losses.data<double>()[0] = loss / ranks;
      pg.allreduce(losses)->wait();
      const double lossDiff = std::abs(losses.data<double>()[0] - referenceLoss) / referenceLoss;
      check.expect(lossDiff <= kTolerance, "step ", step, ": loss ", losses.data<double>()[0],
                   " against the unsharded ", referenceLoss);
      for (int l = 0; l < kLayers; ++l) {
        worst =
            std::max(worst, examples::relativeDifference(asMatrix(fsdp.gather(l)), reference[l]));
        fsdp.release(l);
      }
    }
    check.expect(worst <= kTolerance, "the sharded layers differ from the unsharded ones by ",
                 worst);
    // Parameters, gradients and Adam's two moments of every layer: what one rank of plain data
    // parallelism holds.
    const size_t unsharded = 4 * sizeof(float) * kLayers * kWidth * kWidth;
    if (rank == 0) {
      std::printf(
          "fsdp: %d ranks, %d layers of %dx%d, %d Adam steps: loss and layers within %.0e "
          "of the unsharded model (worst %.1e); memory per rank: peak %zu bytes, resident "
          "between steps %zu, unsharded %zu (parameters, gradients, 2 moments); per step %llu "
          "bytes all-gathered, %llu reduce-scattered\n",
          ranks, kLayers, kWidth, kWidth, kSteps, kTolerance, worst, fsdp.peakBytes(),
          fsdp.residentBytes(), unsharded, static_cast<unsigned long long>(gathered),
          static_cast<unsigned long long>(scattered));
    }
  });
}
