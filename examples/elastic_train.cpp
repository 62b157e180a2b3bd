// Data-parallel training that keeps going when ranks die, without restarting the survivors:
//
//   c10drun --elastic --nproc-per-node 4 elastic_train [--steps 300] [--step-ms 5] [--min-size 2]
//   c10drun --max-restarts 3 --nproc-per-node 4 elastic_train      # dead ranks come back
//
// Linear regression on a synthetic dataset every rank generates from one seed. Step s trains on
// the global batch s (kBatch samples, the same whatever the world size); the members split it by
// rank, average their gradients with one allreduce, and apply the update only once every member
// agrees that its step succeeded (ElasticGroup::commit). When a rank dies, the step fails on
// every survivor; they re-form the group without it (ElasticGroup::reform), heal the parameters
// from a member that committed the most steps, and redo the step. So every sample of a committed
// step was used exactly once, by exactly one member. A rank the launcher starts again asks to
// join; the members admit it at their next step boundary and it receives the parameters.
//
// Each rank prints its pid when it starts and, at the end, the step reached and a hash of its
// parameters: after a kill, the survivors print their first pids and one hash. Exits 0 when the
// loss went down and the rank reached the last step.

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "c10d/checkpoint/State.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/elastic/ElasticGroup.hpp"

namespace {

constexpr int kFeatures = 16;
constexpr int kSamples = 8192;
constexpr int kBatch = 48;  // divisible by 1, 2, 3 and 4 members: no member idles
constexpr float kLearningRate = 0.05f;

// Sample i's features and target, the same on every rank: x from a hash of (i, j), y = <w*, x>.
float feature(int sample, int j) {
  uint32_t h = static_cast<uint32_t>(sample) * 2654435761u ^ static_cast<uint32_t>(j) * 40503u;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return static_cast<float>(h % 2001) / 1000.0f - 1.0f;
}

float target(int sample) {
  float y = 0;
  for (int j = 0; j < kFeatures; ++j) y += feature(sample, j) * static_cast<float>(j % 5 - 2);
  return y;
}

float loss(const std::vector<float>& w) {
  double sum = 0;
  for (int i = 0; i < 1024; ++i) {
    float prediction = 0;
    for (int j = 0; j < kFeatures; ++j) prediction += w[j] * feature(i, j);
    sum += (prediction - target(i)) * (prediction - target(i));
  }
  return static_cast<float>(sum / 1024);
}

uint64_t hashOf(const std::vector<float>& w) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the bytes
  for (float v : w) {
    unsigned char bytes[sizeof(float)];
    std::memcpy(bytes, &v, sizeof(float));
    for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
  }
  return h;
}

int intOption(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = intOption(argc, argv, "--steps", 300);
  const int stepMs = intOption(argc, argv, "--step-ms", 5);
  c10d::elastic::ElasticOptions options;
  options.minSize = intOption(argc, argv, "--min-size", 1);
  try {
    auto elastic = c10d::elastic::ElasticGroup::fromEnvironment(options);
    std::printf("start id %d pid %d\n", elastic->id(), static_cast<int>(::getpid()));
    std::fflush(stdout);

    std::vector<float> w(kFeatures, 0.0f);
    c10d::checkpoint::State state;  // what a survivor behind receives from one ahead
    state.add("w", c10d::Tensor::fromBlob(w.data(), c10d::ScalarType::Float32, {kFeatures}));
    const float before = loss(w);
    if (elastic->incarnation() > 0) {
      const c10d::elastic::Reformation r = elastic->join(&state);
      std::printf("id %d (restarted) joined generation %llu at step %lld in %.3f s\n",
                  elastic->id(), static_cast<unsigned long long>(r.generation),
                  static_cast<long long>(r.step), r.seconds);
      std::fflush(stdout);
    }

    while (elastic->step() < steps) {
      const int step = static_cast<int>(elastic->step());
      std::vector<float> gradient(kFeatures, 0.0f);
      bool ok = true;
      try {
        const int rank = elastic->rank(), size = elastic->size();
        for (int b = rank; b < kBatch; b += size) {
          const int sample = (step * kBatch + b) % kSamples;
          float prediction = 0;
          for (int j = 0; j < kFeatures; ++j) prediction += w[j] * feature(sample, j);
          const float error = prediction - target(sample);
          for (int j = 0; j < kFeatures; ++j) gradient[j] += 2 * error * feature(sample, j);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(stepMs));  // the model's compute
        elastic->group()
            .allreduce(c10d::Tensor::fromBlob(gradient.data(), c10d::ScalarType::Float32,
                                              {kFeatures}))
            ->wait();
      } catch (const c10d::Error&) {
        ok = false;  // a lost rank: every survivor fails this step and re-forms
      }
      if (elastic->commit(ok)) {
        for (int j = 0; j < kFeatures; ++j) w[j] -= kLearningRate * gradient[j] / kBatch;
        if (!elastic->joinsPending()) continue;  // else: grow at this step boundary
      }
      const c10d::elastic::Reformation r = elastic->reform(&state);
      auto list = [](const std::vector<int>& ids) {
        std::string text;
        for (int id : ids) text += (text.empty() ? "" : ",") + std::to_string(id);
        return text;
      };
      std::printf("id %d: generation %llu without [%s] with [%s]: members [%s] at step %lld%s, "
                  "re-formed in %.3f s\n",
                  elastic->id(), static_cast<unsigned long long>(r.generation),
                  list(r.lost).c_str(), list(r.joined).c_str(), list(r.members).c_str(),
                  static_cast<long long>(r.step), r.healed ? " (healed)" : "", r.seconds);
      std::fflush(stdout);
    }
    const float after = loss(w);
    std::printf("done id %d pid %d generation %llu size %d step %lld loss %.6f -> %.6f hash "
                "%016llx\n",
                elastic->id(), static_cast<int>(::getpid()),
                static_cast<unsigned long long>(elastic->generation()), elastic->size(),
                static_cast<long long>(elastic->step()), before, after,
                static_cast<unsigned long long>(hashOf(w)));
    return after < before ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "elastic_train: %s\n", e.what());
    return 1;
  }
}
