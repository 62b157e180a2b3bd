// Uneven inputs: data-parallel least squares where the ranks hold different numbers of batches
// (rank r has kBatches + r), the situation where plain allreduce training hangs at the last
// epoch. A c10d::Join lets the ranks that run out early shadow the others' gradient allreduce
// with zeros until every rank is done. A DistributedSampler deals the samples out, reshuffled
// each epoch. Run it with `c10drun --nproc-per-node 4 uneven_join`.
//
// Exits 0 only when every rank finished every epoch, agreed on the last rank to join (the
// highest one, which has the most batches), ran or shadowed the same number of steps, ended
// with bit-identical parameters, and the loss went down.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "ExampleUtils.hpp"
#include "c10d/training/DistributedSampler.hpp"
#include "c10d/training/Join.hpp"

namespace {

constexpr int kFeatures = 8;
constexpr int kSamples = 2048;
constexpr int kBatch = 16;
constexpr int kBatches = 6;  // rank r trains on kBatches + r of them per epoch
constexpr int kEpochs = 4;
constexpr double kLearningRate = 0.1;

struct Dataset {
  std::vector<double> x;  // kSamples x kFeatures
  std::vector<double> y;
};

Dataset makeDataset() {
  std::mt19937 generator(2024);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> hidden(kFeatures);
  for (double& w : hidden) w = normal(generator);
  Dataset data{std::vector<double>(kSamples * kFeatures), std::vector<double>(kSamples)};
  for (int s = 0; s < kSamples; ++s) {
    double y = 0.1 * normal(generator);
    for (int f = 0; f < kFeatures; ++f) {
      data.x[s * kFeatures + f] = normal(generator);
      y += hidden[f] * data.x[s * kFeatures + f];
    }
    data.y[s] = y;
  }
  return data;
}

void run(c10d::ProcessGroup& pg, examples::Checker& checks) {
  const int rank = pg.rank();
  const Dataset data = makeDataset();
  c10d::DistributedSampler sampler(kSamples, pg.size(), rank, {.shuffle = true, .seed = 7});
  const int myBatches = kBatches + rank;
  checks.expect(sampler.numSamples() >= myBatches * kBatch, "rank ", rank, " has only ",
                sampler.numSamples(), " samples");

  std::vector<double> w(kFeatures, 0.0);
  // Gradient sums, then the number of samples behind them: summed over the active ranks.
  c10d::Tensor grad = c10d::Tensor::zeros({kFeatures + 1}, c10d::ScalarType::Float64);
  auto applyGradient = [&] {
    const double* g = grad.data<double>();
    for (int f = 0; f < kFeatures; ++f) w[f] -= kLearningRate * g[f] / g[kFeatures];
  };
  auto loss = [&] {
    double total = 0.0;
    for (int s = 0; s < kSamples; ++s) {
      double error = -data.y[s];
      for (int f = 0; f < kFeatures; ++f) error += w[f] * data.x[s * kFeatures + f];
      total += error * error;
    }
    return total / kSamples;
  };

  const double firstLoss = loss();
  int stepsRun = 0;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    sampler.setEpoch(epoch);
    std::vector<int64_t> mine = sampler.indices();
    c10d::Join join(pg);
    int shadowed = 0;
    for (int b = 0; b < myBatches; ++b) {
      join.step();
      double* g = grad.data<double>();
      std::fill(g, g + kFeatures + 1, 0.0);
      for (int k = b * kBatch; k < (b + 1) * kBatch; ++k) {
        const double* x = &data.x[mine[k] * kFeatures];
        double error = -data.y[mine[k]];
        for (int f = 0; f < kFeatures; ++f) error += w[f] * x[f];
        for (int f = 0; f < kFeatures; ++f) g[f] += 2.0 * error * x[f];
      }
      g[kFeatures] = kBatch;
      pg.allreduce(grad)->wait();
      applyGradient();
      ++stepsRun;
    }
    int last = join.finish([&] {
      // The same allreduce with nothing in it: the active ranks' update is unchanged.
      std::fill(grad.data<double>(), grad.data<double>() + kFeatures + 1, 0.0);
      pg.allreduce(grad)->wait();
      applyGradient();
      ++shadowed;
      ++stepsRun;
    });
    checks.expect(last == pg.size() - 1, "epoch ", epoch, ": last rank to join is ", last,
                  ", expected ", pg.size() - 1);
    checks.expect(shadowed == pg.size() - 1 - rank, "epoch ", epoch, ": shadowed ", shadowed,
                  " steps, expected ", pg.size() - 1 - rank);
    if (epoch == kEpochs - 1) {
      std::printf("rank %d: %d batches per epoch, shadowed %d step(s); last rank to join: %d\n",
                  rank, myBatches, shadowed, last);
    }
  }
  const double lastLoss = loss();
  checks.expect(stepsRun == kEpochs * (kBatches + pg.size() - 1), "ran ", stepsRun, " steps");
  checks.expect(lastLoss < firstLoss * 0.5, "loss went from ", firstLoss, " to ", lastLoss);

  // Every rank applied the same updates: max and min over ranks equal this rank's weights.
  c10d::Tensor highest = c10d::Tensor::empty({kFeatures}, c10d::ScalarType::Float64);
  c10d::Tensor lowest = c10d::Tensor::empty({kFeatures}, c10d::ScalarType::Float64);
  std::copy(w.begin(), w.end(), highest.data<double>());
  std::copy(w.begin(), w.end(), lowest.data<double>());
  pg.allreduce(highest, {.reduceOp = c10d::ReduceOp::MAX})->wait();
  pg.allreduce(lowest, {.reduceOp = c10d::ReduceOp::MIN})->wait();
  bool same = true;
  for (int f = 0; f < kFeatures; ++f) {
    same = same && highest.data<double>()[f] == w[f] && lowest.data<double>()[f] == w[f];
  }
  checks.expect(same, "parameters differ across ranks");
  if (rank == 0) {
    std::printf("loss %.4f -> %.4f over %d epochs; parameters %s on all %d ranks\n", firstLoss,
                lastLoss, kEpochs, same ? "identical" : "DIFFERENT", pg.size());
  }
}

}  // namespace

int main() {
  return examples::runExample("uneven_join", run);
}
