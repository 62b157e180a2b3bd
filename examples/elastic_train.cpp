// Data-parallel training that keeps going when ranks die, without restarting the survivors:
//
//   c10drun --elastic --nproc-per-node 4 elastic_train [--steps 300] [--step-ms 5] [--min-size 2]
//                                                      [--join-timeout-ms 10000]
//   c10drun --max-restarts 3 --nproc-per-node 4 elastic_train      # dead ranks come back
//   ... elastic_train --checkpoint-dir /tmp/ckpt --checkpoint-every 50  # saves as it trains
//   ... elastic_train --die-at 2:optimizer:120   # id 2 SIGKILLs itself there (fault tests)
//
// Linear regression on a synthetic dataset every rank generates from one seed. Step s trains on
// window s of its epoch's shuffled order (kBatch samples, the same whatever the world size:
// DistributedSampler::window); the members split it by rank, average their gradients with one
// allreduce, and apply the update only once every member agrees that its step succeeded
// (ElasticGroup::commit). When a rank dies, the step fails on
// every survivor; they re-form the group without it (ElasticGroup::reform), heal the parameters
// from a member that committed the most steps, and redo the step. So every sample of a committed
// step was used exactly once, by exactly one member. A rank the launcher starts again asks to
// join; the members admit it at their next step boundary and it receives the parameters.
//
// Each rank prints its pid when it starts and, at the end, the step reached and a hash of its
// parameters: after a kill, the survivors print their first pids and one hash. Exits 0 when the
// loss went down and the rank reached the last step. With --count-samples, the allreduce also
// counts each sample's uses, the counts are part of the replicated (healed) state, and at the end
// every rank checks that each sample went into committed steps exactly once per epoch.
//
// With --checkpoint-dir, the members save the state every --checkpoint-every committed steps
// (c10d/checkpoint: any world size); a save that fails because a rank died is left incomplete,
// the members re-form, and at the end each rank loads the newest complete checkpoint. --die-at
// ID:PHASE:STEP makes the first process of id ID SIGKILL itself at step STEP, in PHASE: reduce
// (as the others reduce the gradients), optimizer (after the step committed, before the update)
// or checkpoint (as the others start saving), so tests can kill at those points exactly.

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "c10d/checkpoint/Checkpoint.hpp"
#include "c10d/checkpoint/State.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/elastic/ElasticGroup.hpp"
#include "c10d/training/DistributedSampler.hpp"

namespace {

constexpr int kFeatures = 16;
constexpr int kSamples = 960;
constexpr int kBatch = 48;  // divisible by 1, 2, 3 and 4 members: no member idles
constexpr int kStepsPerEpoch = (kSamples + kBatch - 1) / kBatch;
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

std::string textOption(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return {};
}

int intOption(int argc, char** argv, const char* name, int fallback) {
  const std::string text = textOption(argc, argv, name);
  return text.empty() ? fallback : std::atoi(text.c_str());
}

// --die-at ID:PHASE:STEP.
struct DieAt {
  int id = -1;
  std::string phase;
  int64_t step = -1;

  static DieAt parse(const std::string& text) {
    DieAt at;
    if (text.empty()) return at;
    const size_t a = text.find(':'), b = text.rfind(':');
    if (a == std::string::npos || a == b) {
      throw std::invalid_argument("--die-at takes ID:PHASE:STEP, got '" + text + "'");
    }
    at.id = std::stoi(text.substr(0, a));
    at.phase = text.substr(a + 1, b - a - 1);
    at.step = std::stoll(text.substr(b + 1));
    if (at.phase != "reduce" && at.phase != "optimizer" && at.phase != "checkpoint") {
      throw std::invalid_argument("--die-at: phase '" + at.phase +
                                  "': expected reduce, optimizer or checkpoint");
    }
    return at;
  }
  // A restarted process of that id does not die again.
  void here(const c10d::elastic::ElasticGroup& elastic, const char* now, int64_t step) const {
    if (elastic.id() != id || elastic.incarnation() != 0 || phase != now || step != this->step) {
      return;
    }
    std::printf("id %d: dying in %s at step %lld\n", id, now, static_cast<long long>(step));
    std::fflush(stdout);
    ::raise(SIGKILL);
  }
};

bool flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = intOption(argc, argv, "--steps", 300);
  const int stepMs = intOption(argc, argv, "--step-ms", 5);
  const bool countSamples = flag(argc, argv, "--count-samples");
  c10d::elastic::ElasticOptions options;
  options.minSize = intOption(argc, argv, "--min-size", 1);
  options.joinTimeout =
      std::chrono::milliseconds(intOption(argc, argv, "--join-timeout-ms", 10000));
  const std::string checkpointDir = textOption(argc, argv, "--checkpoint-dir");
  const int checkpointEvery = intOption(argc, argv, "--checkpoint-every", 50);
  try {
    const DieAt dieAt = DieAt::parse(textOption(argc, argv, "--die-at"));
    auto elastic = c10d::elastic::ElasticGroup::fromEnvironment(options);
    std::printf("start id %d pid %d\n", elastic->id(), static_cast<int>(::getpid()));
    std::fflush(stdout);

    std::vector<float> w(kFeatures, 0.0f);
    std::vector<float> uses(kSamples, 0.0f);  // --count-samples: each sample's committed uses
    c10d::checkpoint::State state;            // what a survivor behind receives from one ahead
    state.add("w", c10d::Tensor::fromBlob(w.data(), c10d::ScalarType::Float32, {kFeatures}));
    if (countSamples) {
      state.add("uses", c10d::Tensor::fromBlob(uses.data(), c10d::ScalarType::Float32, {kSamples}));
    }
    bool saving = false;  // the save hook also runs on a member that heals others
    state.beforeSave([&] {
      if (saving) dieAt.here(*elastic, "checkpoint", elastic->step());
    });
    const float before = loss(w);
    if (elastic->incarnation() > 0) {
      const c10d::elastic::Reformation r = elastic->join(&state);
      std::printf("id %d (restarted) joined generation %llu at step %lld in %.3f s\n",
                  elastic->id(), static_cast<unsigned long long>(r.generation),
                  static_cast<long long>(r.step), r.seconds);
      std::fflush(stdout);
    }

    c10d::DistributedSampler sampler(kSamples, elastic->size(), elastic->rank(),
                                     {.shuffle = true, .seed = 17});
    while (elastic->step() < steps) {
      const int step = static_cast<int>(elastic->step());
      // The gradient, then (--count-samples) how often this step used each sample.
      std::vector<float> gradient(kFeatures + (countSamples ? kSamples : 0), 0.0f);
      bool ok = true;
      try {
        sampler.reshard(elastic->size(), elastic->rank());  // after a reform: the new split
        if (sampler.epoch() != static_cast<uint64_t>(step / kStepsPerEpoch)) {
          sampler.setEpoch(static_cast<uint64_t>(step / kStepsPerEpoch));
        }
        for (int64_t sample : sampler.window((step % kStepsPerEpoch) * kBatch, kBatch)) {
          if (countSamples) gradient[kFeatures + sample] += 1.0f;
          float prediction = 0;
          for (int j = 0; j < kFeatures; ++j) prediction += w[j] * feature(sample, j);
          const float error = prediction - target(sample);
          for (int j = 0; j < kFeatures; ++j) gradient[j] += 2 * error * feature(sample, j);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(stepMs));  // the model's compute
        dieAt.here(*elastic, "reduce", step);
        elastic->group()
            .allreduce(c10d::Tensor::fromBlob(gradient.data(), c10d::ScalarType::Float32,
                                              {static_cast<int64_t>(gradient.size())}))
            ->wait();
      } catch (const c10d::Error&) {
        ok = false;  // a lost rank: every survivor fails this step and re-forms
      }
      if (elastic->commit(ok)) {
        dieAt.here(*elastic, "optimizer", step);
        for (int j = 0; j < kFeatures; ++j) w[j] -= kLearningRate * gradient[j] / kBatch;
        for (int i = 0; countSamples && i < kSamples; ++i) uses[i] += gradient[kFeatures + i];
        bool saved = true;
        if (!checkpointDir.empty() && elastic->step() % checkpointEvery == 0) {
          state.setInt("step", elastic->step());
          saving = true;
          try {
            c10d::checkpoint::save(state,
                                   checkpointDir + "/step-" + std::to_string(elastic->step()),
                                   &elastic->group());
          } catch (const c10d::Error& e) {
            saved = false;  // a rank died while saving: no checkpoint of this step
            std::printf("id %d: the checkpoint of step %lld failed: %s\n", elastic->id(),
                        static_cast<long long>(elastic->step()), e.what());
          }
          saving = false;
        }
        if (saved && !elastic->joinsPending()) continue;  // else: grow at this step boundary
      }
      const c10d::elastic::Reformation r = elastic->reform(&state);
      auto list = [](const std::vector<int>& ids) {
        std::string text;
        for (int id : ids) text += (text.empty() ? "" : ",") + std::to_string(id);
        return text;
      };
      std::printf(
          "id %d: generation %llu without [%s] with [%s]: members [%s] at step %lld%s, "
          "re-formed in %.3f s\n",
          elastic->id(), static_cast<unsigned long long>(r.generation), list(r.lost).c_str(),
          list(r.joined).c_str(), list(r.members).c_str(), static_cast<long long>(r.step),
          r.healed ? " (healed)" : "", r.seconds);
      std::fflush(stdout);
    }
    const float after = loss(w);
    if (!checkpointDir.empty()) {
      // The newest complete checkpoint loads, whatever world size saved it.
      const std::optional<std::string> newest = c10d::checkpoint::latest(checkpointDir);
      if (!newest) throw std::runtime_error("no complete checkpoint in " + checkpointDir);
      std::vector<float> loaded(kFeatures, 0.0f);
      c10d::checkpoint::State check;
      check.add("w", c10d::Tensor::fromBlob(loaded.data(), c10d::ScalarType::Float32, {kFeatures}));
      check.setInt("step", 0);
      c10d::checkpoint::load(check, *newest, &elastic->group(), {.allowUnexpected = true});
      std::printf("id %d: loaded the newest complete checkpoint %s (step %lld)\n", elastic->id(),
                  newest->c_str(), static_cast<long long>(check.getInt("step")));
    }
    if (countSamples) {
      // Whole epochs only: steps a multiple of kStepsPerEpoch.
      const float epochs = static_cast<float>(steps / kStepsPerEpoch);
      int wrong = 0;
      for (int i = 0; i < kSamples; ++i) wrong += uses[i] != epochs;
      std::printf("id %d: %s: %d of %d samples used other than %d times in committed steps\n",
                  elastic->id(), wrong == 0 ? "exactly once per epoch" : "NOT exactly once", wrong,
                  kSamples, static_cast<int>(epochs));
      if (wrong != 0 || steps % kStepsPerEpoch != 0) return 1;
    }
    std::printf(
        "done id %d pid %d generation %llu size %d step %lld loss %.6f -> %.6f hash "
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
