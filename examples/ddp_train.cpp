// Data-parallel training with c10d::DistributedDataParallel: a small multi-layer perceptron in
// plain C++ (two hidden layers, tanh) learns a synthetic regression task. Every rank generates
// the same dataset from a fixed seed and trains on its rank-strided shard. Backward runs layer by
// layer from the last, and as soon as a layer's gradients are done it calls markGradReady for
// them, so the reducer averages the last layers' gradients while the first layers' are still
// being computed; finalizeBackward() leaves the averages in place and every rank takes the same
// step. Rank 0 prints `epoch E loss L`.
//
//   c10drun --nproc-per-node 4 ddp_train        (or under mpirun with C10D_BACKEND=mpi)
//
// Exits 0 only when the loss fell from the first epoch to the last and the parameters are
// bit-identical on every rank after the last step.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ExampleUtils.hpp"
#include "c10d/training/DistributedDataParallel.hpp"

namespace {

constexpr int kSamples = 2048;
constexpr int kInputs = 8;
constexpr int kHidden = 32;
constexpr int kBatch = 16;  // per rank
constexpr int kEpochs = 10;
constexpr float kLearningRate = 0.1f;
constexpr uint32_t kDataSeed = 20261124;
constexpr uint32_t kInitSeed = 11;

// One dense layer: y = W x + b, W is outputs x inputs, row-major.
struct Layer {
  int inputs, outputs;
  examples::Mirror weight, bias, weightGrad, biasGrad;
  Layer(int in, int out)
      : inputs(in),
        outputs(out),
        weight({out, in}, c10d::ScalarType::Float32),
        bias({out}, c10d::ScalarType::Float32),
        weightGrad({out, in}, c10d::ScalarType::Float32),
        biasGrad({out}, c10d::ScalarType::Float32) {}
  float* w() const { return weight.host().data<float>(); }
  float* b() const { return bias.host().data<float>(); }
  float* gw() const { return weightGrad.host().data<float>(); }
  float* gb() const { return biasGrad.host().data<float>(); }
};

struct Dataset {
  std::vector<float> inputs;   // kSamples x kInputs
  std::vector<float> targets;  // kSamples
};

Dataset makeDataset() {
  std::mt19937 gen(kDataSeed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Dataset data;
  for (int s = 0; s < kSamples; ++s) {
    float target = 0.0f;
    for (int i = 0; i < kInputs; ++i) {
      float x = uniform(gen);
      data.inputs.push_back(x);
      target += (i % 2 ? 0.5f : -0.3f) * x * x + 0.2f * std::sin(3.0f * x);
    }
    data.targets.push_back(target);
  }
  return data;
}

class Network {
 public:
  Network() : layers_{Layer(kInputs, kHidden), Layer(kHidden, kHidden), Layer(kHidden, 1)} {
    std::mt19937 gen(kInitSeed);
    for (Layer& layer : layers_) {
      std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(float(layer.inputs)));
      for (int k = 0; k < layer.inputs * layer.outputs; ++k) layer.w()[k] = normal(gen);
      for (int k = 0; k < layer.outputs; ++k) layer.b()[k] = 0.0f;
    }
  }

  std::vector<Layer>& layers() { return layers_; }

  // Registration order is model order: layer 0's weight and bias get indices 0 and 1, and so on.
  std::vector<c10d::DataParallelParameter> parameters() {
    std::vector<c10d::DataParallelParameter> out;
    for (size_t l = 0; l < layers_.size(); ++l) {
      Layer& layer = layers_[l];
      std::string name = "layer" + std::to_string(l);
      out.push_back({layer.weight.device(), layer.weightGrad.device(), name + ".weight"});
      out.push_back({layer.bias.device(), layer.biasGrad.device(), name + ".bias"});
    }
    return out;
  }

  // Forward and backward over a batch; after each layer's gradients are complete, ready(l) runs.
  // Returns the batch's mean squared error.
  template <typename Ready>
  double step(const float* inputs, const float* targets, int n, Ready&& ready) {
    const int depth = static_cast<int>(layers_.size());
    std::vector<std::vector<float>> activations(depth + 1);
    activations[0].assign(inputs, inputs + n * kInputs);
    for (int l = 0; l < depth; ++l) {
      const Layer& layer = layers_[l];
      std::vector<float>& out = activations[l + 1];
      out.assign(static_cast<size_t>(n) * layer.outputs, 0.0f);
      for (int s = 0; s < n; ++s) {
        for (int o = 0; o < layer.outputs; ++o) {
          float z = layer.b()[o];
          for (int i = 0; i < layer.inputs; ++i)
            z += layer.w()[o * layer.inputs + i] * activations[l][s * layer.inputs + i];
          out[s * layer.outputs + o] = l + 1 < depth ? std::tanh(z) : z;
        }
      }
    }
    // d loss / d output of the last layer (mean squared error).
    double loss = 0.0;
    std::vector<float> delta(n);
    for (int s = 0; s < n; ++s) {
      float error = activations[depth][s] - targets[s];
      loss += error * error;
      delta[s] = 2.0f * error / n;
    }
    for (int l = depth - 1; l >= 0; --l) {
      Layer& layer = layers_[l];
      std::fill(layer.gw(), layer.gw() + layer.inputs * layer.outputs, 0.0f);
      std::fill(layer.gb(), layer.gb() + layer.outputs, 0.0f);
      std::vector<float> below(static_cast<size_t>(n) * layer.inputs, 0.0f);
      for (int s = 0; s < n; ++s) {
        for (int o = 0; o < layer.outputs; ++o) {
          float d = delta[s * layer.outputs + o];
          layer.gb()[o] += d;
          for (int i = 0; i < layer.inputs; ++i) {
            float a = activations[l][s * layer.inputs + i];
            layer.gw()[o * layer.inputs + i] += d * a;
            below[s * layer.inputs + i] += d * layer.w()[o * layer.inputs + i];
          }
        }
      }
      ready(l);  // this layer's gradients are final: its reduction can start now
      if (l > 0) {
        for (size_t k = 0; k < below.size(); ++k) {
          float a = activations[l][k];
          below[k] *= 1.0f - a * a;  // through tanh
        }
        delta = std::move(below);
      }
    }
    return loss / n;
  }

 private:
  std::vector<Layer> layers_;
};

void run(c10d::ProcessGroup& pg, examples::Checker& checks) {
  Dataset data = makeDataset();
  Network net;
  c10d::DistributedDataParallel ddp(pg, net.parameters());
  for (Layer& layer : net.layers()) {
    layer.weight.push();
    layer.bias.push();
  }
  ddp.syncParameters();  // rank 0's initial values everywhere, and the shapes checked
  for (Layer& layer : net.layers()) {
    layer.weight.pull();
    layer.bias.pull();
  }

  std::vector<int> shard;
  for (int s = pg.rank(); s < kSamples / pg.size() * pg.size(); s += pg.size()) shard.push_back(s);
  double firstLoss = 0.0, lastLoss = 0.0;
  std::vector<float> inputs, targets;
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    double lossSum = 0.0;
    int batches = 0;
    for (size_t begin = 0; begin < shard.size(); begin += kBatch) {
      size_t end = std::min(shard.size(), begin + kBatch);
      inputs.clear();
      targets.clear();
      for (size_t k = begin; k < end; ++k) {
        const float* x = &data.inputs[static_cast<size_t>(shard[k]) * kInputs];
        inputs.insert(inputs.end(), x, x + kInputs);
        targets.push_back(data.targets[shard[k]]);
      }
      lossSum += net.step(inputs.data(), targets.data(), static_cast<int>(end - begin), [&](int l) {
        Layer& layer = net.layers()[l];
        layer.weightGrad.push();
        layer.biasGrad.push();
        ddp.markGradReady(2 * l);
        ddp.markGradReady(2 * l + 1);
      });
      ddp.finalizeBackward();
      ++batches;
      for (Layer& layer : net.layers()) {
        layer.weightGrad.pull();
        layer.biasGrad.pull();
        for (int k = 0; k < layer.inputs * layer.outputs; ++k)
          layer.w()[k] -= kLearningRate * layer.gw()[k];
        for (int k = 0; k < layer.outputs; ++k) layer.b()[k] -= kLearningRate * layer.gb()[k];
        layer.weight.push();
        layer.bias.push();
      }
    }
    // The epoch's loss, averaged over the ranks.
    examples::Mirror loss({1}, c10d::ScalarType::Float64);
    loss.host().data<double>()[0] = lossSum / batches / pg.size();
    loss.push();
    pg.allreduce(loss.device())->wait();
    loss.pull();
    double mean = loss.host().data<double>()[0];
    if (epoch == 1) firstLoss = mean;
    lastLoss = mean;
    if (pg.rank() == 0) std::printf("epoch %d loss %.5f\n", epoch, mean);
  }
  checks.expect(lastLoss < firstLoss, "final loss ", lastLoss, " is not below the first epoch's ",
                firstLoss);

  // Identical parameters: the max and the min over the ranks both equal this rank's, bit for bit.
  bool same = true;
  for (Layer& layer : net.layers()) {
    for (const examples::Mirror* p : {&layer.weight, &layer.bias}) {
      int64_t n = p->host().numel();
      c10d::Tensor highest = examples::empty({n}, c10d::ScalarType::Float32);
      c10d::Tensor lowest = examples::empty({n}, c10d::ScalarType::Float32);
      auto mine = [&](int64_t i) { return p->host().data<float>()[i]; };
      examples::fill<float>(highest, mine);
      examples::fill<float>(lowest, mine);
      pg.allreduce(highest, {.reduceOp = c10d::ReduceOp::MAX})->wait();
      pg.allreduce(lowest, {.reduceOp = c10d::ReduceOp::MIN})->wait();
      same &= checks.expectValues<float>(highest, mine, "max over ranks of a parameter") &&
              checks.expectValues<float>(lowest, mine, "min over ranks of a parameter");
    }
  }
  std::printf("rank %d: loss %.5f -> %.5f (%s); parameters %s across %d rank(s)\n", pg.rank(),
              firstLoss, lastLoss, lastLoss < firstLoss ? "lower" : "NOT LOWER",
              same ? "identical" : "DIFFER", pg.size());
}

}  // namespace

int main() {
  return examples::runExample("ddp_train", run);
}
