// Distributed backward (rpc/autograd/DistAutograd.hpp), PyTorch's FAST mode over a local
// backward each worker provides: a two-worker model-parallel network trained with backward and
// DistributedOptimizer gives, bit for bit, the weights and losses of the same network trained in
// one process; a worker without a local backward, a local backward that answers wrongly and a
// lost worker are errors that say so.

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>

#include "rpc/autograd/DistAutograd.hpp"
#include "rpc/autograd/DistributedOptimizer.hpp"
#include "tests/support/RpcTestUtil.hpp"

namespace c10d::inline v1::rpc {
namespace {

using test::messageOf;
using test::shutdownAll;
using test::startWorkers;

Tensor doubles(std::vector<double> values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, ScalarType::Float64);
  std::copy(values.begin(), values.end(), t.data<double>());
  return t;
}

const double* at(const Tensor& t) {
  return t.data<double>();
}

// The network: h = tanh(A x) (A: 3x4, on worker0), out = B h (B: 2x3, on worker1),
// loss = sum(out^2) / 2. The layers' arithmetic, shared by both trainings.
Tensor matvec(const Tensor& m, int rows, int cols, const Tensor& v) {
  Tensor out = Tensor::empty({rows}, ScalarType::Float64);
  for (int i = 0; i < rows; ++i) {
    double sum = 0;
    for (int j = 0; j < cols; ++j) sum += at(m)[i * cols + j] * at(v)[j];
    out.data<double>()[i] = sum;
  }
  return out;
}
Tensor tanhOf(const Tensor& a) {
  Tensor h = Tensor::empty(a.sizes(), ScalarType::Float64);
  for (int64_t i = 0; i < a.numel(); ++i) h.data<double>()[i] = std::tanh(at(a)[i]);
  return h;
}
// d(loss)/d(m) for out = m v given d(loss)/d(out) = g: the outer product g v^T.
Tensor outer(const Tensor& g, const Tensor& v) {
  Tensor out = Tensor::empty({g.numel() * v.numel()}, ScalarType::Float64);
  for (int64_t i = 0; i < g.numel(); ++i) {
    for (int64_t j = 0; j < v.numel(); ++j)
      out.data<double>()[i * v.numel() + j] = at(g)[i] * at(v)[j];
  }
  return out;
}
// d(loss)/d(v) for out = m v: m^T g.
Tensor transposedTimes(const Tensor& m, int rows, int cols, const Tensor& g) {
  Tensor out = Tensor::empty({cols}, ScalarType::Float64);
  for (int j = 0; j < cols; ++j) {
    double sum = 0;
    for (int i = 0; i < rows; ++i) sum += at(m)[i * cols + j] * at(g)[i];
    out.data<double>()[j] = sum;
  }
  return out;
}
Tensor tanhBackward(const Tensor& h, const Tensor& g) {
  Tensor out = Tensor::empty(h.sizes(), ScalarType::Float64);
  for (int64_t i = 0; i < h.numel(); ++i) {
    out.data<double>()[i] = at(g)[i] * (1 - at(h)[i] * at(h)[i]);
  }
  return out;
}
double lossOf(const Tensor& out) {
  double sum = 0;
  for (int64_t i = 0; i < out.numel(); ++i) sum += at(out)[i] * at(out)[i];
  return sum / 2;
}
void sgd(Tensor& p, const Tensor& g, double lr) {  // as c10d's functional SGD computes it
  for (int64_t i = 0; i < p.numel(); ++i) {
    double d = at(g)[i] + 0.0 * at(p)[i];
    p.data<double>()[i] -= lr * d;
  }
}

const std::vector<double> kA{0.1, -0.2, 0.3, 0.05, 0.4, 0.1, -0.3, 0.2, -0.1, 0.25, 0.15, -0.05};
const std::vector<double> kB{0.5, -0.4, 0.3, -0.2, 0.1, 0.6};
// Two epochs of three inputs.
const std::vector<std::vector<double>> kInputs{{1, 0.5, -0.5, 2},      {0.3, -1, 0.7, 0.1},
                                               {-0.2, 0.4, 1.5, -0.8}, {1, 0.5, -0.5, 2},
                                               {0.3, -1, 0.7, 0.1},    {-0.2, 0.4, 1.5, -0.8}};
constexpr double kLr = 0.1;

// What each worker's "framework" remembers of its forward passes, per context: its local
// backward finds tensors by their memory, as an autograd tape would by identity.
struct Tape {
  std::mutex mutex;
  std::map<int64_t,
           std::map<const void*,
                    std::function<std::vector<std::pair<const void*, Tensor>>(const Tensor&)>>>
      nodes;  // context -> output -> (gradient of output -> gradients of its inputs)
};

// Runs a tape's nodes from the seeds (one level: each seed's node yields gradients of received
// tensors or of nothing further), and answers the received tensors' gradients.
std::vector<Tensor> runTape(Tape& tape, const LocalBackwardCall& call) {
  std::map<const void*, Tensor> grads;
  std::lock_guard<std::mutex> guard(tape.mutex);
  auto& nodes = tape.nodes[call.contextId];
  for (const auto& [tensor, grad] : call.seeds) {
    grads[tensor.data()] = grad;
    auto node = nodes.find(tensor.data());
    if (node == nodes.end()) continue;
    for (auto& [input, g] : node->second(grad)) grads[input] = g;
  }
  std::vector<Tensor> out;
  for (const Tensor& r : call.received) {
    auto it = grads.find(r.data());
    out.push_back(it == grads.end() ? Tensor() : it->second);
  }
  return out;
}

// Each worker registers its layer's weight (an RRef it owns) as "weight", worker1 its layer as
// "layerB", and a local backward over its tape.
std::vector<std::shared_ptr<RpcAgent>> startNetwork(std::array<Tape, 2>& tapes, int workers = 2) {
  return startWorkers(workers, {}, [&tapes](RpcAgent& agent) {
    RpcAgent* self = &agent;
    const int id = agent.self().id;
    if (id > 1) return;  // a worker without layers, and without a local backward
    Tape& tape = tapes[id];
    RRef<Tensor> mine = agent.makeRRef(doubles(id == 0 ? kA : kB));
    agent.registerFunction("weight", [mine] { return mine; });
    if (id == 1) {
      agent.registerFunction("layerB", [self, &tape, mine](const Tensor& h) {
        Tensor b = mine.localValue();
        Tensor out = matvec(b, 2, 3, h);
        const int64_t context = currentContextId();
        std::lock_guard<std::mutex> guard(tape.mutex);
        tape.nodes[context][out.data()] = [self, context, mine, b, h](const Tensor& g) {
          accumulateGradient(*self, context, mine, outer(g, h));
          return std::vector<std::pair<const void*, Tensor>>{
              {h.data(), transposedTimes(b, 2, 3, g)}};
        };
        return out;
      });
    }
    setLocalBackward(agent, [&tape](const LocalBackwardCall& call) { return runTape(tape, call); });
  });
}

// One step on worker0 in context: the forward (layer A here, layer B on worker1), the loss.
std::pair<double, Tensor> forward(RpcAgent& agent, Tape& tape, DistAutogradContext& context,
                                  const RRef<Tensor>& a, const std::vector<double>& input) {
  Tensor x = doubles(input);
  Tensor weightA = a.localValue();
  Tensor h = tanhOf(matvec(weightA, 3, 4, x));
  {
    std::lock_guard<std::mutex> guard(tape.mutex);
    RpcAgent* self = &agent;
    const int64_t id = context.id();
    tape.nodes[id][h.data()] = [self, id, a, h, x](const Tensor& g) {
      accumulateGradient(*self, id, a, outer(tanhBackward(h, g), x));
      return std::vector<std::pair<const void*, Tensor>>{};
    };
  }
  Tensor out = context.rpcSync<Tensor>("worker1", "layerB", h);
  return {lossOf(out), out};
}

TEST(DistBackward, ModelParallelTrainingEqualsOneProcessBitForBit) {
  std::array<Tape, 2> tapes;
  auto agents = startNetwork(tapes);
  RpcAgent& trainer = *agents[0];
  RRef<Tensor> a = trainer.rpcSync<RRef<Tensor>>("worker0", "weight");
  RRef<Tensor> b = trainer.rpcSync<RRef<Tensor>>("worker1", "weight");
  DistributedOptimizer optimizer(agents[0], OptimizerSpec::sgd(kLr), {a, b});
  std::vector<double> losses;
  for (const auto& input : kInputs) {
    DistAutogradContext context(agents[0]);
    auto [loss, out] = forward(trainer, tapes[0], context, a, input);
    losses.push_back(loss);
    context.backward({{out, out}});  // d(sum(out^2)/2)/d(out) = out
    optimizer.step(context.id());
  }

  // The same network in one process, the same arithmetic in the same order.
  Tensor refA = doubles(kA);
  Tensor refB = doubles(kB);
  std::vector<double> refLosses;
  for (const auto& input : kInputs) {
    Tensor x = doubles(input);
    Tensor h = tanhOf(matvec(refA, 3, 4, x));
    Tensor out = matvec(refB, 2, 3, h);
    refLosses.push_back(lossOf(out));
    Tensor gradB = outer(out, h);
    Tensor gradA = outer(tanhBackward(h, transposedTimes(refB, 2, 3, out)), x);
    sgd(refA, gradA, kLr);
    sgd(refB, gradB, kLr);
  }
  EXPECT_EQ(losses, refLosses);
  EXPECT_GT(refLosses[0], refLosses[3]);  // it trains: the first input's loss fell
  Tensor trainedA = a.toHere();
  Tensor trainedB = b.toHere();
  EXPECT_EQ(std::vector<double>(at(trainedA), at(trainedA) + 12),
            std::vector<double>(at(refA), at(refA) + 12));
  EXPECT_EQ(std::vector<double>(at(trainedB), at(trainedB) + 6),
            std::vector<double>(at(refB), at(refB) + 6));
  size_t live = 0;
  for (auto& agent : agents) live += liveGradientContexts(*agent);
  EXPECT_EQ(live, 0u);  // every context was released everywhere it went
  shutdownAll(agents);
}

TEST(DistBackward, MisuseAndALostWorkerAreNamed) {
  std::array<Tape, 2> tapes;
  auto agents = startNetwork(tapes, 3);
  RpcAgent& trainer = *agents[0];
  RRef<Tensor> a = trainer.rpcSync<RRef<Tensor>>("worker0", "weight");
  {
    // worker2 has no local backward.
    DistAutogradContext context(agents[2]);
    Tensor t = doubles({1, 2});
    std::string message = messageOf([&] { context.backward({{t, t}}); });
    EXPECT_NE(message.find("worker 'worker2'"), std::string::npos) << message;
    EXPECT_NE(message.find("setLocalBackward"), std::string::npos) << message;
    EXPECT_THROW(context.backward({{t, doubles({1})}}), InvalidArgument);  // a mismatched root
    EXPECT_THROW(context.backward({}), InvalidArgument);
  }
  {
    // A local backward that returns too few gradients.
    setLocalBackward(*agents[1], [](const LocalBackwardCall&) { return std::vector<Tensor>(); });
    DistAutogradContext context(agents[0]);
    auto [loss, out] = forward(trainer, tapes[0], context, a, kInputs[0]);
    (void)loss;
    std::string message = messageOf([&] { context.backward({{out, out}}); });
    EXPECT_NE(message.find("returned 0 gradients for the 1 tensors"), std::string::npos) << message;
    EXPECT_NE(message.find("worker1"), std::string::npos) << message;
  }
  {
    // worker1 is lost after the forward: the backward fails naming it.
    DistAutogradContext context(agents[0]);
    auto [loss, out] = forward(trainer, tapes[0], context, a, kInputs[1]);
    (void)loss;
    agents[1]->shutdown(false);
    std::string message = messageOf([&] { context.backward({{out, out}}); });
    EXPECT_NE(message.find("worker1"), std::string::npos) << message;
    EXPECT_THROW(context.backward({{out, out}}), RemoteError);
  }
  for (auto& agent : agents) agent->shutdown(false);  // a graceful one would wait for worker1
}

}  // namespace
}  // namespace c10d::inline v1::rpc
