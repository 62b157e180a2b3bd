// Training that saves and resumes: ZeRO-2 with Adam on a linear model, batches from a
// DistributedSampler, and a per-rank random generator that drops samples (as dropout would).
// At --save-at the job saves its whole state (parameters, Adam's sharded moments and steps, the
// sampler's place, every rank's generator, the step) into ROOT/step-N; with --resume it starts
// from the newest complete checkpoint under ROOT, at whatever world size it runs with.
//
//   c10drun --nproc-per-node 4 checkpoint_resume --root ckpt --steps 20 --save-at 10
//   c10drun --nproc-per-node 4 checkpoint_resume --root ckpt --steps 20 --resume  # same result
//   c10drun --nproc-per-node 3 checkpoint_resume --root ckpt --steps 20 --resume  # loss falls
//
// Every rank prints "step N loss L" (the mean over all ranks' batches) and, at the end,
// "parameters <hash>": two runs that reach the same parameters bit for bit print the same hash.

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>

#include "c10d/checkpoint/Checkpoint.hpp"
#include "c10d/parallel/ZeroOptimizer.hpp"
#include "c10d/training/DistributedSampler.hpp"
#include "examples/ExampleUtils.hpp"

namespace {

constexpr int kIn = 16, kOut = 8, kSamples = 512, kBatch = 8;
constexpr float kKeep = 0.9f;  // the share of samples the generator keeps

struct Args {
  std::string root = "checkpoints";
  int steps = 20;
  int saveAt = -1;
  bool resume = false;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw c10d::InvalidArgument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--root") {
      args.root = next();
    } else if (arg == "--steps") {
      args.steps = std::stoi(next());
    } else if (arg == "--save-at") {
      args.saveAt = std::stoi(next());
    } else if (arg == "--resume") {
      args.resume = true;
    } else {
      throw c10d::InvalidArgument("unknown argument '" + arg +
                                  "' (--root DIR --steps N --save-at K --resume)");
    }
  }
  return args;
}

// The data: x from a fixed generator, y = x W* + b*, the same on every rank.
struct Dataset {
  std::vector<float> x = std::vector<float>(kSamples * kIn), y = std::vector<float>(kSamples * kOut);
  Dataset() {
    std::mt19937 generator(2024);
    std::uniform_real_distribution<float> uniform(-1, 1);
    std::vector<float> w(kIn * kOut), b(kOut);
    for (float& v : w) v = uniform(generator);
    for (float& v : b) v = uniform(generator);
    for (float& v : x) v = uniform(generator);
    for (int s = 0; s < kSamples; ++s) {
      for (int o = 0; o < kOut; ++o) {
        float sum = b[o];
        for (int i = 0; i < kIn; ++i) sum += x[s * kIn + i] * w[i * kOut + o];
        y[s * kOut + o] = sum;
      }
    }
  }
};

std::string hashOf(const std::vector<float>& a, const std::vector<float>& b) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the bytes
  for (const auto* v : {&a, &b}) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(v->data());
    for (size_t i = 0; i < v->size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_resume: %s\n", e.what());
    return 2;
  }
  return examples::runExample("checkpoint_resume", [&](c10d::ProcessGroup& pg,
                                                        examples::Checker& check) {
    const int rank = pg.rank(), ranks = pg.size();
    const Dataset data;
    std::vector<float> w(kIn * kOut, 0.0f), b(kOut, 0.0f), gw(w.size()), gb(b.size());
    auto tensor = [](std::vector<float>& v) {
      return c10d::Tensor::fromBlob(v.data(), c10d::ScalarType::Float32,
                                    {static_cast<int64_t>(v.size())});
    };
    c10d::ZeroOptimizer zero(pg, {{tensor(w), tensor(gw), "w"}, {tensor(b), tensor(gb), "b"}},
                             c10d::OptimizerSpec::adam(0.05), {.stage = 2});
    c10d::DistributedSampler sampler(kSamples, ranks, rank, {.shuffle = true, .seed = 7});
    std::mt19937_64 dropout(1000 + rank);

    int step = 0;
    if (args.resume) {
      auto from = c10d::checkpoint::latest(args.root);
      if (!from) throw c10d::InvalidArgument("--resume: no complete checkpoint under " + args.root);
      c10d::checkpoint::State state;
      zero.addToState(state, "model.");
      sampler.addToState(state, "sampler.", 0);
      state.setInt("step", 0);
      // Every rank's generator (a load sets every value the checkpoint has): a rank the saving
      // job did not have starts from its seed.
      const std::string mine = "rng.rank" + std::to_string(rank);
      c10d::checkpoint::load(state, *from, &pg);
      step = static_cast<int>(state.getInt("step"));
      if (auto saved = state.value(mine)) std::istringstream(*saved) >> dropout;
      if (rank == 0) std::printf("resumed from %s at step %d on %d ranks\n", from->c_str(), step, ranks);
    } else {
      zero.reducer().syncParameters();
    }

    std::vector<int64_t> indices = sampler.indices();
    size_t next = 0;
    float loss = 0;
    for (++step; step <= args.steps; ++step) {
      if (next + kBatch > indices.size()) {  // the epoch's end
        sampler.setEpoch(sampler.epoch() + 1);
        indices = sampler.indices();
        next = 0;
      }
      // Mean squared error over the kept samples of this rank's batch.
      std::fill(gw.begin(), gw.end(), 0.0f);
      std::fill(gb.begin(), gb.end(), 0.0f);
      float sum = 0;
      for (int k = 0; k < kBatch; ++k) {
        const int64_t s = indices[next + k];
        const bool kept = std::uniform_real_distribution<float>(0, 1)(dropout) < kKeep;
        for (int o = 0; o < kOut; ++o) {
          float out = b[o];
          for (int i = 0; i < kIn; ++i) out += data.x[s * kIn + i] * w[i * kOut + o];
          const float error = out - data.y[s * kOut + o];
          sum += error * error;
          if (!kept) continue;
          const float d = 2 * error / (kBatch * kOut);
          gb[o] += d;
          for (int i = 0; i < kIn; ++i) gw[i * kOut + o] += d * data.x[s * kIn + i];
        }
      }
      next += kBatch;
      zero.reducer().markGradReady(1);
      zero.reducer().markGradReady(0);
      check.expect(zero.step(), "ZeroOptimizer::step took a step");
      float total[1] = {sum / (kBatch * kOut)};
      pg.allreduce(c10d::Tensor::fromBlob(total, c10d::ScalarType::Float32, {1}),
                   {.reduceOp = c10d::ReduceOp::AVG})
          ->wait();
      loss = total[0];
      if (rank == 0) std::printf("step %d loss %.6f\n", step, loss);

      if (step == args.saveAt) {
        c10d::checkpoint::State state;
        zero.addToState(state, "model.");
        sampler.addToState(state, "sampler.", static_cast<int64_t>(next));
        std::ostringstream generator;
        generator << dropout;
        state.setValue("rng.rank" + std::to_string(rank), generator.str());
        state.setInt("step", step);
        const std::string dir = args.root + "/step-" + std::to_string(step);
        c10d::checkpoint::save(state, dir, &pg, {.overwrite = true, .layout = "data=" + std::to_string(ranks)});
        if (rank == 0) std::printf("saved %s\n", dir.c_str());
      }
    }
    check.expect(std::isfinite(loss), "the loss is finite");
    std::printf("rank %d parameters %s\n", rank, hashOf(w, b).c_str());
  });
}
