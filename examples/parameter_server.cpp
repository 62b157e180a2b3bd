// Parameter-server training over RPC, as PyTorch's parameter-server tutorial: rank 0 ("ps") owns
// a logistic-regression model; every other rank is a trainer that, for each batch of its own
// shard of a synthetic dataset, runs the model's forward on the server inside a distributed
// autograd context (context.rpcSync), computes the loss and its gradient by the logits itself,
// runs the distributed backward (the server's local backward turns that into the parameters'
// gradients) and steps a DistributedOptimizer over the server's parameters. Trainers report each
// epoch's loss; rank 0 prints `epoch E loss L` (averaged over trainers).
//
//   c10drun --nproc-per-node 3 parameter_server
//
// Exits 0 only when the loss fell from the first epoch to the last and, once every trainer has
// shut down, the server holds no value for any remote reference (none leaked).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <vector>

#include "c10d/Init.hpp"
#include "rpc/autograd/DistAutograd.hpp"
#include "rpc/autograd/DistributedOptimizer.hpp"

namespace {

using c10d::Tensor;
using c10d::rpc::RpcAgent;
using c10d::rpc::RRef;

constexpr int kSamples = 2048;
constexpr int kFeatures = 8;
constexpr int kBatch = 64;
constexpr int kEpochs = 6;
constexpr double kLearningRate = 0.5;
constexpr uint32_t kDataSeed = 20261122;

struct Dataset {
  std::vector<double> features;  // kSamples x kFeatures
  std::vector<double> labels;
};

// Every rank builds the same data from the seed; trainer t takes samples t, t+T, t+2T, ...
Dataset makeDataset() {
  std::mt19937 gen(kDataSeed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> hidden(kFeatures + 1);
  for (double& w : hidden) w = normal(gen);
  Dataset data;
  for (int s = 0; s < kSamples; ++s) {
    double logit = hidden[kFeatures];
    for (int f = 0; f < kFeatures; ++f) {
      double x = normal(gen);
      data.features.push_back(x);
      logit += hidden[f] * x;
    }
    data.labels.push_back(logit + 0.5 * normal(gen) > 0 ? 1.0 : 0.0);
  }
  return data;
}

Tensor zeros(int64_t n) {
  return Tensor::zeros({n}, c10d::ScalarType::Float64);
}

// The server's side: the model, its forward and local backward, and the losses trainers report.
class Server {
 public:
  explicit Server(int trainers) : trainers_(trainers) {}

  void setup(RpcAgent& agent) {
    agent_ = &agent;
    weights_ = agent.makeRRef(zeros(kFeatures));
    bias_ = agent.makeRRef(zeros(1));
    agent.registerFunction("parameters", [this] { return std::vector{weights_, bias_}; });
    agent.registerFunction("forward", [this](const Tensor& features) { return forward(features); });
    agent.registerFunction("report", [this](int epoch, double loss) { report(epoch, loss); });
    c10d::rpc::setLocalBackward(
        agent, [this](const c10d::rpc::LocalBackwardCall& call) { return backward(call); });
  }

  // The logits of a batch (rows of kFeatures), remembered under the call's context for the
  // backward pass, as an autograd tape would.
  Tensor forward(const Tensor& features) {
    const int64_t n = features.numel() / kFeatures;
    const double* w = weights_.localValue().data<double>();
    const double b = bias_.localValue().data<double>()[0];
    Tensor logits = zeros(n);
    for (int64_t k = 0; k < n; ++k) {
      double z = b;
      for (int f = 0; f < kFeatures; ++f) z += w[f] * features.data<double>()[k * kFeatures + f];
      logits.data<double>()[k] = z;
    }
    std::lock_guard<std::mutex> guard(mutex_);
    tape_[c10d::rpc::currentContextId()] = features;
    return logits;
  }

  // The seeds are the logits this server sent and their gradients: the parameters' gradients
  // follow (features need none, so nothing goes back to the trainer).
  std::vector<Tensor> backward(const c10d::rpc::LocalBackwardCall& call) {
    Tensor features;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      features = tape_.at(call.contextId);
      tape_.erase(call.contextId);
    }
    Tensor gradWeights = zeros(kFeatures);
    Tensor gradBias = zeros(1);
    for (const auto& [logits, grad] : call.seeds) {
      for (int64_t k = 0; k < logits.numel(); ++k) {
        const double g = grad.data<double>()[k];
        for (int f = 0; f < kFeatures; ++f) {
          gradWeights.data<double>()[f] += g * features.data<double>()[k * kFeatures + f];
        }
        gradBias.data<double>()[0] += g;
      }
    }
    c10d::rpc::accumulateGradient(*agent_, call.contextId, weights_, gradWeights);
    c10d::rpc::accumulateGradient(*agent_, call.contextId, bias_, gradBias);
    return std::vector<Tensor>(call.received.size());
  }

  void report(int epoch, double loss) {
    std::lock_guard<std::mutex> guard(mutex_);
    auto& [sum, count] = epochs_[epoch];
    sum += loss;
    if (++count == trainers_) {
      std::printf("epoch %d loss %.4f\n", epoch, sum / trainers_);
      std::fflush(stdout);
    }
  }

  // Epoch -> loss averaged over trainers, for the epochs every trainer reported.
  std::map<int, double> losses() {
    std::lock_guard<std::mutex> guard(mutex_);
    std::map<int, double> out;
    for (const auto& [epoch, entry] : epochs_) {
      if (entry.second == trainers_) out[epoch] = entry.first / trainers_;
    }
    return out;
  }

 private:
  int trainers_;
  RpcAgent* agent_ = nullptr;
  RRef<Tensor> weights_, bias_;
  std::mutex mutex_;
  std::map<int, std::pair<double, int>> epochs_;
  std::map<int64_t, Tensor> tape_;  // context -> the batch its forward ran on
};

void train(std::shared_ptr<RpcAgent> agent, int trainer, int trainers) {
  Dataset data = makeDataset();
  auto params = agent->rpcSync<std::vector<RRef<Tensor>>>("ps", "parameters");
  c10d::rpc::DistributedOptimizer optimizer(agent, c10d::rpc::OptimizerSpec::sgd(kLearningRate),
                                            params);
  std::vector<int> shard;
  for (int s = trainer; s < kSamples; s += trainers) shard.push_back(s);
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    double lossSum = 0;
    for (size_t start = 0; start < shard.size(); start += kBatch) {
      size_t end = std::min(shard.size(), start + kBatch);
      const auto n = static_cast<int64_t>(end - start);
      Tensor features = zeros(n * kFeatures);
      for (int64_t k = 0; k < n; ++k) {
        const double* x = &data.features[static_cast<size_t>(shard[start + k]) * kFeatures];
        std::copy(x, x + kFeatures, features.data<double>() + k * kFeatures);
      }
      c10d::rpc::DistAutogradContext context(agent);
      Tensor logits = context.rpcSync<Tensor>("ps", "forward", features);
      // The mean binary cross-entropy, and its gradient by the logits: (sigmoid(z) - y) / n.
      Tensor gradLogits = zeros(n);
      for (int64_t k = 0; k < n; ++k) {
        double p = 1.0 / (1.0 + std::exp(-logits.data<double>()[k]));
        double y = data.labels[shard[start + k]];
        lossSum -= y * std::log(p + 1e-12) + (1 - y) * std::log(1 - p + 1e-12);
        gradLogits.data<double>()[k] = (p - y) / static_cast<double>(n);
      }
      context.backward({{logits, gradLogits}});
      optimizer.step(context.id());
    }
    agent->rpcSync<void>("ps", "report", epoch, lossSum / static_cast<double>(shard.size()));
  }
}

}  // namespace

int main() {
  try {
    c10d::InitOptions init;
    c10d::WorldInfo world = c10d::detectWorld(init);
    C10D_CHECK(world.worldSize >= 2, c10d::InvalidArgument,
               "parameter_server needs a server and at least one trainer (2+ ranks), got ",
               world.worldSize);
    const int trainers = world.worldSize - 1;
    auto store = c10d::connectStore(init, world);
    Server server(trainers);
    std::string name = world.rank == 0 ? "ps" : "trainer" + std::to_string(world.rank);
    auto agent = RpcAgent::create(store, name, world.rank, world.worldSize, {}, [&](RpcAgent& a) {
      if (world.rank == 0) server.setup(a);
    });
    if (world.rank != 0) {
      train(agent, world.rank - 1, trainers);
      agent->shutdown();
      return 0;
    }
    agent->shutdown();  // returns once every trainer has finished and shut down
    std::map<int, double> losses = server.losses();
    bool ok = true;
    if (static_cast<int>(losses.size()) != kEpochs) {
      std::fprintf(stderr, "FAILED: %zu of %d epochs were reported by every trainer\n",
                   losses.size(), kEpochs);
      ok = false;
    } else if (!(losses.rbegin()->second < losses.begin()->second)) {
      std::fprintf(stderr, "FAILED: the loss did not fall (%.4f -> %.4f)\n", losses.begin()->second,
                   losses.rbegin()->second);
      ok = false;
    } else {
      std::printf("checked: the loss fell from %.4f to %.4f over %d epochs with %d trainer(s)\n",
                  losses.begin()->second, losses.rbegin()->second, kEpochs, trainers);
    }
    c10d::rpc::RRefStats stats = agent->rrefStats();
    if (stats.owned != 0) {
      std::fprintf(stderr, "FAILED: the server still holds %zu value(s) for remote references\n",
                   stats.owned);
      ok = false;
    } else {
      std::printf("checked: no remote reference left on the server\n");
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parameter_server: %s\n", e.what());
    return 1;
  }
}
