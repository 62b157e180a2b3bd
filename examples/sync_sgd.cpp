// Synchronous data-parallel SGD in plain C++: logistic regression on a synthetic dataset whose
// labels come from a hidden weight vector plus noise. Every rank generates the same dataset from
// a fixed seed and trains on its own rank-strided shard; after each batch the ranks average
// their gradients with allreduce, so every rank applies the same update and the parameters stay
// identical, which is what DistributedDataParallel does for a real model. Rank 0 prints the loss
// (averaged over ranks) after each epoch. Run it with `c10drun --nproc-per-node 4 sync_sgd`.
//
// Exits 0 only when the loss went down from the first epoch to the last and every rank ends with
// bit-identical parameters.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <utility>
#include <vector>

#include "ExampleUtils.hpp"

namespace {

constexpr int kSamples = 4096;
constexpr int kFeatures = 16;
constexpr int kParams = kFeatures + 1;  // weights, then the bias
constexpr int kBatch = 32;              // per rank: the global batch grows with the world
constexpr int kEpochs = 10;
constexpr float kLearningRate = 0.2f;
constexpr float kLabelNoise = 0.5f;  // std-dev of the noise added to the hidden logit
constexpr uint32_t kDataSeed = 20240611;
constexpr uint32_t kInitSeed = 7;

struct Dataset {
  std::vector<float> features;  // kSamples x kFeatures, row-major
  std::vector<float> labels;    // 0 or 1
};

// The same on every rank because every rank runs this binary with the same seed: no rank has to
// ship data to another.
Dataset makeDataset() {
  std::mt19937 gen(kDataSeed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> hidden(kParams);
  for (float& w : hidden) w = normal(gen);
  Dataset data;
  data.features.resize(static_cast<size_t>(kSamples) * kFeatures);
  data.labels.resize(kSamples);
  for (int s = 0; s < kSamples; ++s) {
    float logit = hidden[kFeatures];
    for (int f = 0; f < kFeatures; ++f) {
      float x = normal(gen);
      data.features[static_cast<size_t>(s) * kFeatures + f] = x;
      logit += hidden[f] * x;
    }
    data.labels[s] = logit + kLabelNoise * normal(gen) > 0.0f ? 1.0f : 0.0f;
  }
  return data;
}

double logitOf(const float* params, const float* x) {
  double z = params[kFeatures];
  for (int f = 0; f < kFeatures; ++f) z += static_cast<double>(params[f]) * x[f];
  return z;
}

// Binary cross-entropy on a logit, written so that large |z| neither overflows nor loses digits.
double lossOf(double z, float label) {
  return std::max(z, 0.0) - label * z + std::log1p(std::exp(-std::abs(z)));
}

class Trainer {
 public:
  Trainer(c10d::ProcessGroup& pg, const Dataset& data) : pg_(pg), data_(data) {
    // Equal shards on every rank, so every rank runs the same number of steps and the
    // allreduce calls pair up; with a world size that does not divide kSamples the few
    // leftover samples are not used.
    for (int s = pg.rank(); s < kSamples / pg.size() * pg.size(); s += pg.size()) {
      shard_.push_back(s);
    }
  }

  int shardSize() const { return static_cast<int>(shard_.size()); }
  int stepsPerEpoch() const { return (shardSize() + kBatch - 1) / kBatch; }

  // params on the host (the model is plain C++); grad's device tensor is what gets averaged.
  void trainEpoch(const c10d::Tensor& params, const examples::Mirror& grad) {
    float* p = params.data<float>();
    float* g = grad.host().data<float>();
    for (int begin = 0; begin < shardSize(); begin += kBatch) {
      int end = std::min(begin + kBatch, shardSize());
      std::vector<double> sum(kParams, 0.0);
      for (int k = begin; k < end; ++k) {
        const float* x = sample(k);
        double z = logitOf(p, x);
        double error = 1.0 / (1.0 + std::exp(-z)) - label(k);  // d loss / d z
        for (int f = 0; f < kFeatures; ++f) sum[f] += error * x[f];
        sum[kFeatures] += error;
      }
      for (int i = 0; i < kParams; ++i) g[i] = static_cast<float>(sum[i] / (end - begin));
      // Every rank's batch has the same size, so the mean of the ranks' mean gradients is the
      // mean gradient of the global batch.
      grad.push();
      pg_.allreduce(grad.device(), {.reduceOp = c10d::ReduceOp::SUM})->wait();
      grad.pull();
      for (int i = 0; i < kParams; ++i) p[i] -= kLearningRate * (g[i] / pg_.size());
    }
  }

  // Loss and accuracy over the whole shard, averaged over the ranks.
  std::pair<double, double> evaluate(const c10d::Tensor& params) {
    double loss = 0.0;
    int correct = 0;
    for (int k = 0; k < shardSize(); ++k) {
      double z = logitOf(params.data<float>(), sample(k));
      loss += lossOf(z, label(k));
      correct += (z > 0.0) == (label(k) > 0.5f) ? 1 : 0;
    }
    examples::Mirror stats({2}, c10d::ScalarType::Float64);
    stats.host().data<double>()[0] = loss / shardSize();
    stats.host().data<double>()[1] = static_cast<double>(correct) / shardSize();
    stats.push();
    pg_.allreduce(stats.device())->wait();
    stats.pull();
    const double* mean = stats.host().data<double>();
    return {mean[0] / pg_.size(), mean[1] / pg_.size()};
  }

 private:
  const float* sample(int k) const {
    return &data_.features[static_cast<size_t>(shard_[k]) * kFeatures];
  }
  float label(int k) const { return data_.labels[shard_[k]]; }

  c10d::ProcessGroup& pg_;
  const Dataset& data_;
  std::vector<int> shard_;  // indices into data_, this rank's samples
};

void run(c10d::ProcessGroup& pg, examples::Checker& checks) {
  const int rank = pg.rank();
  Dataset data = makeDataset();
  Trainer trainer(pg, data);

  examples::Mirror paramsMirror({kParams}, c10d::ScalarType::Float32);
  const c10d::Tensor& params = paramsMirror.host();
  examples::Mirror grad({kParams}, c10d::ScalarType::Float32);
  std::mt19937 gen(kInitSeed);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  examples::fill<float>(params, [&](int64_t) { return normal(gen); });
  // The seed already gives every rank the same start; the broadcast makes that hold even for a
  // rank whose standard library draws differently, as torch's DDP does at construction.
  paramsMirror.push();
  pg.broadcast(paramsMirror.device(), {.rootRank = 0})->wait();
  paramsMirror.pull();

  double firstLoss = 0.0;
  double lastLoss = 0.0;
  double lastAccuracy = 0.0;
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    trainer.trainEpoch(params, grad);
    auto [loss, accuracy] = trainer.evaluate(params);
    if (epoch == 1) firstLoss = loss;
    lastLoss = loss;
    lastAccuracy = accuracy;
    if (rank == 0) std::printf("epoch %d loss %.4f accuracy %.3f\n", epoch, loss, accuracy);
  }
  checks.expect(lastLoss < firstLoss, "final loss ", lastLoss, " is not below the first epoch's ",
                firstLoss);

  // Identical parameters everywhere means the element-wise max and min over ranks both equal
  // this rank's copy, bit for bit.
  c10d::Tensor highest = examples::empty({kParams}, c10d::ScalarType::Float32);
  c10d::Tensor lowest = examples::empty({kParams}, c10d::ScalarType::Float32);
  for (const c10d::Tensor& copy : {highest, lowest}) {
    examples::fill<float>(copy, [&](int64_t i) { return params.data<float>()[i]; });
  }
  pg.allreduce(highest, {.reduceOp = c10d::ReduceOp::MAX})->wait();
  pg.allreduce(lowest, {.reduceOp = c10d::ReduceOp::MIN})->wait();
  auto mine = [&](int64_t i) { return params.data<float>()[i]; };
  bool same = checks.expectValues<float>(highest, mine, "max over ranks of the parameters") &&
              checks.expectValues<float>(lowest, mine, "min over ranks of the parameters");

  std::printf(
      "rank %d: %d samples, %d steps/epoch; loss %.4f -> %.4f (%s), accuracy %.3f; parameters "
      "%s across %d rank(s)\n",
      rank, trainer.shardSize(), trainer.stepsPerEpoch(), firstLoss, lastLoss,
      lastLoss < firstLoss ? "lower" : "NOT LOWER", lastAccuracy, same ? "identical" : "DIFFER",
      pg.size());
}

}  // namespace

int main() {
  return examples::runExample("sync_sgd", run);
}
