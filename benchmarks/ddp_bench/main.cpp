// c10d-ddp-bench: the data-parallel reducer on the gradients of real models. A synthetic backward
// walks the parameters from the last to the first, spending --ns-per-byte nanoseconds per byte of
// each gradient (sleeping, as a backward on an accelerator leaves the CPU to communication)
// before the gradient is ready. Per model it times one step:
//   local       the backward alone, no communication
//   per_tensor  the backward, then one allreduce per gradient (issued together, then waited)
//   reducer     the backward marking each gradient ready; DistributedDataParallel's buckets are
//               reduced while it goes on; finalizeBackward()
// and reports exposed = reducer - local: the communication the backward did not hide. A step's
// time is the slowest rank's; the figure is the median over --steps steps.
//
//   c10drun --nproc-per-node 2 build/benchmarks/c10d-ddp-bench --model resnet50 [--json]
//   ... --model all --sweep      (bucket caps from 0.5 to 200 MiB)
//
//   fusion      the backward submitting each gradient to a FusionQueue as it is ready, then
//               waiting for all of them
// --json prints one line per model and world size: model, world, local_ms, per_tensor_ms,
// reducer_ms, fusion_ms, exposed_ms (the reducer's), bytes (gradient bytes each rank reduces per
// step, after compression), negotiation_us_per_cycle (the fusion queue's agreeing, steady state).
//
// --memory instead measures what an Adam step keeps, per rank, beyond the framework's parameters
// and gradients, with DataParallelOptimizer (ddp), ZeroOptimizer stage 1 (zero1) and stage 2
// (zero2): the host allocator's live bytes (detail::HostBlockCache) after 1 + --steps steps (kept),
// the most during the --steps after the first (peak), the optimizer's state, the gradient bytes
// (kept minus the state, minus for ZeRO the parameters' shard, the same elements as one of Adam's
// buffers), and the mean time of those steps (backward, reduction, Adam, for ZeRO the gather).
// The largest rank's figures, in MiB and ms. Freed blocks the cache keeps for reuse
// (C10D_HOST_CACHE_MB) are not live and not counted.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/ddp_bench/Models.hpp"
#include "c10d/Init.hpp"
#include "c10d/core/HostBlockCache.hpp"
#include "c10d/parallel/ZeroOptimizer.hpp"
#include "c10d/training/DataParallelOptimizer.hpp"
#include "c10d/training/DistributedDataParallel.hpp"
#include "c10d/training/FusionQueue.hpp"
#include "c10d/training/PowerSgd.hpp"

namespace c10d::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string model = "resnet50";
  bool json = false;
  bool sweep = false;
  bool memory = false;
  int steps = 5;
  int warmup = 1;
  double nsPerByte = 1.0;
  double bucketCapMb = 25.0;
  std::string hook = "allreduce";
  bool view = false;
  size_t powerSgdRank = 4;
};

// The gradients of a model: shapes from Models.hpp, or "small1k": 1,000 gradients of 1 KiB.
std::vector<std::vector<int64_t>> shapesOf(const std::string& name) {
  if (name == "small1k") return std::vector<std::vector<int64_t>>(1000, {256});
  for (const ModelShapes& model : knownModels()) {
    if (model.name == name) return model.shapes;
  }
  std::string known = "small1k";
  for (const ModelShapes& model : knownModels()) known += ", " + std::string(model.name);
  throw InvalidArgument("c10d-ddp-bench: unknown model '" + name + "' (known: " + known + ")");
}

class Bench {
 public:
  Bench(ProcessGroup& pg, const Options& options, const std::vector<std::vector<int64_t>>& shapes)
      : pg_(pg), options_(options) {
    for (const auto& shape : shapes) {
      values_.push_back(Tensor::empty(shape, ScalarType::Float32));
      grads_.push_back(Tensor::zeros(shape, ScalarType::Float32));
      names_.push_back("grad." + std::to_string(names_.size()));
      std::fill(grads_.back().data<float>(), grads_.back().data<float>() + grads_.back().numel(),
                static_cast<float>(pg.rank() + 1));
    }
  }

  // What each rank sends per step: the gradients, or with a compression hook what it makes of them.
  size_t gradientBytes() const {
    size_t bytes = 0;
    for (const Tensor& g : grads_) {
      if (options_.hook == "fp16" || options_.hook == "bf16") {
        bytes += g.nbytes() / 2;
      } else if (options_.hook == "powersgd" && g.dim() >= 2) {
        // As PowerSgd decides: an n x m matrix goes as (n + m) r numbers when that is smaller.
        int64_t n = g.sizes()[0], m = g.numel() / n;
        int64_t r = std::min<int64_t>({static_cast<int64_t>(options_.powerSgdRank), n, m});
        bytes += ((n + m) * r < n * m ? (n + m) * r : n * m) * g.elementSize();
      } else {
        bytes += g.nbytes();
      }
    }
    return bytes;
  }

  // The backward: gradient k is ready once the compute of every gradient after it is spent.
  template <typename Ready>
  void backward(Ready&& ready) {
    auto due = Clock::now();
    for (size_t k = grads_.size(); k-- > 0;) {
      due +=
          std::chrono::nanoseconds(static_cast<int64_t>(options_.nsPerByte * grads_[k].nbytes()));
      std::this_thread::sleep_until(due);
      ready(k);
    }
  }

  // The slowest rank's step time, median over the steps, in ms.
  template <typename Step>
  double time(Step&& step) {
    std::vector<double> times;
    for (int s = 0; s < options_.warmup + options_.steps; ++s) {
      pg_.barrier()->wait();
      auto start = Clock::now();
      step();
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      Tensor slowest = Tensor::empty({1}, ScalarType::Float64);
      slowest.data<double>()[0] = ms;
      pg_.allreduce(slowest, {.reduceOp = ReduceOp::MAX})->wait();
      if (s >= options_.warmup) times.push_back(slowest.data<double>()[0]);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

  double local() {
    return time([&] { backward([](size_t) {}); });
  }

  double perTensor() {
    return time([&] {
      backward([](size_t) {});
      std::vector<std::shared_ptr<Work>> works;
      for (const Tensor& g : grads_) works.push_back(pg_.allreduce(g));
      for (auto& w : works) w->wait();
    });
  }

  // The backward submitting each gradient to the fusion queue as it is ready; then waiting for
  // all. Returns the step time and the negotiation's cost per cycle (us), steady state.
  std::pair<double, double> fusion() {
    FusionQueue queue(pg_);
    std::vector<std::shared_ptr<Future>> futures(grads_.size());
    auto step = [&] {
      backward([&](size_t k) { futures[k] = queue.allreduce(names_[k], grads_[k]); });
      for (auto& f : futures) f->wait();
    };
    step();  // the first step exchanges every name; later ones hit the cache
    double ms = time(step);
    // Steady state: every name cached, nothing pending; what each cycle's agreement costs.
    FusionStats before = queue.stats();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    FusionStats after = queue.stats();
    double perCycle = after.cycles > before.cycles
                          ? (after.negotiationUs - before.negotiationUs) /
                                static_cast<double>(after.cycles - before.cycles)
                          : 0.0;
    return {ms, perCycle};
  }

  struct Memory {
    double keptMb, peakMb, stateMb, gradientMb, stepMs;
  };

  // What one optimizer ("ddp", "zero1", "zero2") keeps and peaks at over Adam steps; the largest
  // rank's figures.
  Memory memory(const std::string& kind) {
    auto& cache = detail::HostBlockCache::process();
    std::vector<DataParallelParameter> parameters;
    for (size_t k = 0; k < values_.size(); ++k) parameters.push_back({values_[k], grads_[k], ""});
    const OptimizerSpec adam = OptimizerSpec::adam(1e-3);
    DataParallelOptions ddpOptions;
    ddpOptions.bucketCapBytes = static_cast<size_t>(options_.bucketCapMb * (1 << 20));
    ZeroOptions zeroOptions;
    zeroOptions.bucketCapBytes = ddpOptions.bucketCapBytes;
    zeroOptions.stage = kind == "zero1" ? 1 : 2;
    const size_t base = cache.liveBytes();
    std::unique_ptr<DistributedDataParallel> ddp;
    std::unique_ptr<DataParallelOptimizer> ddpOptimizer;
    std::unique_ptr<ZeroOptimizer> zero;
    if (kind == "ddp") {
      ddp = std::make_unique<DistributedDataParallel>(pg_, parameters, ddpOptions);
      ddpOptimizer = std::make_unique<DataParallelOptimizer>(*ddp, adam);
    } else {
      zero = std::make_unique<ZeroOptimizer>(pg_, parameters, adam, zeroOptions);
    }
    DistributedDataParallel& reducer = ddp ? *ddp : zero->reducer();
    auto step = [&] {
      backward([&](size_t k) { reducer.markGradReady(k); });
      if (ddpOptimizer) {
        ddpOptimizer->step();
      } else {
        zero->step();
      }
    };
    step();  // the first step settles the buckets and creates the optimizer's state
    pg_.barrier()->wait();
    cache.resetPeak();
    const auto start = Clock::now();
    for (int s = 0; s < options_.steps; ++s) step();
    const double stepMs =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count() / options_.steps;
    pg_.barrier()->wait();
    // An op's worker may hold its finished work a moment after the step returned.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const double mb = 1 << 20;
    const double keptMb = (cache.liveBytes() - base) / mb;
    const double stateMb = (ddpOptimizer ? adamStateBytes() : zero->optimizerStateBytes()) / mb;
    // The largest rank's figure of each, in one allreduce.
    Tensor most = Tensor::empty({5}, ScalarType::Float64);
    double* m = most.data<double>();
    m[0] = keptMb;
    m[1] = (cache.peakLiveBytes() - base) / mb;
    m[2] = stateMb;
    m[3] = keptMb - stateMb - (zero ? stateMb / 2 : 0.0);
    m[4] = stepMs;
    pg_.allreduce(most, {.reduceOp = ReduceOp::MAX})->wait();
    return {m[0], m[1], m[2], m[3], m[4]};
  }

  // Adam's two buffers for every gradient, as DataParallelOptimizer keeps them.
  size_t adamStateBytes() const {
    size_t bytes = 0;
    for (const Tensor& g : grads_) bytes += 2 * g.nbytes();
    return bytes;
  }

  double reducer(double capMb) {
    std::vector<DataParallelParameter> parameters;
    for (size_t k = 0; k < values_.size(); ++k) {
      parameters.push_back({values_[k], options_.view ? Tensor() : grads_[k], ""});
    }
    DataParallelOptions options;
    options.gradientAsBucketView = options_.view;
    options.bucketCapBytes = static_cast<size_t>(capMb * (1 << 20));
    if (options_.hook == "fp16") options.commHook = fp16CompressHook;
    if (options_.hook == "bf16") options.commHook = bf16CompressHook;
    if (options_.hook == "powersgd") {
      options.commHook = PowerSgd({.rank = options_.powerSgdRank}).hook();
    }
    DistributedDataParallel ddp(pg_, parameters, options);
    // The first backward settles the bucket layout; it is not timed.
    backward([&](size_t k) { ddp.markGradReady(k); });
    ddp.finalizeBackward();
    return time([&] {
      backward([&](size_t k) { ddp.markGradReady(k); });
      ddp.finalizeBackward();
    });
  }

 private:
  ProcessGroup& pg_;
  const Options& options_;
  std::vector<Tensor> values_;
  std::vector<Tensor> grads_;
  std::vector<std::string> names_;
};

void runModel(ProcessGroup& pg, const Options& options, const std::string& name) {
  Bench bench(pg, options, shapesOf(name));
  const bool root = pg.rank() == 0;
  if (options.memory) {
    for (const char* kind : {"ddp", "zero1", "zero2"}) {
      Bench::Memory m = bench.memory(kind);
      if (!root) continue;
      if (options.json) {
        std::printf(
            "{\"model\":\"%s\", \"world\":%d, \"optimizer\":\"%s\", \"kept_mb\":%.1f, "
            "\"peak_mb\":%.1f, \"state_mb\":%.1f, \"gradient_mb\":%.1f, \"step_ms\":%.1f}\n",
            name.c_str(), pg.size(), kind, m.keptMb, m.peakMb, m.stateMb, m.gradientMb, m.stepMs);
      } else {
        std::printf("%-13s %5d %-9s %9.1f %9.1f %9.1f %11.1f %9.1f\n", name.c_str(), pg.size(),
                    kind, m.keptMb, m.peakMb, m.stateMb, m.gradientMb, m.stepMs);
      }
    }
    return;
  }
  if (options.sweep) {
    double local = bench.local();
    for (double cap : {0.5, 1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 200.0}) {
      double reducer = bench.reducer(cap);
      if (!root) continue;
      if (options.json) {
        std::printf(
            "{\"model\":\"%s\", \"world\":%d, \"bucket_cap_mb\":%.1f, \"local_ms\":%.2f, "
            "\"reducer_ms\":%.2f, \"exposed_ms\":%.2f}\n",
            name.c_str(), pg.size(), cap, local, reducer, reducer - local);
      } else {
        std::printf("%-13s %5d %9.1f %10.2f %11.2f %11.2f\n", name.c_str(), pg.size(), cap, local,
                    reducer, reducer - local);
      }
    }
    return;
  }
  double local = bench.local();
  double perTensor = bench.perTensor();
  double reducer = bench.reducer(options.bucketCapMb);
  auto [fusion, cycleUs] = bench.fusion();
  size_t bytes = bench.gradientBytes();
  if (!root) return;
  if (options.json) {
    std::printf(
        "{\"model\":\"%s\", \"world\":%d, \"local_ms\":%.2f, \"per_tensor_ms\":%.2f, "
        "\"reducer_ms\":%.2f, \"fusion_ms\":%.2f, \"exposed_ms\":%.2f, \"bytes\":%zu, "
        "\"negotiation_us_per_cycle\":%.1f}\n",
        name.c_str(), pg.size(), local, perTensor, reducer, fusion, reducer - local, bytes,
        cycleUs);
  } else {
    std::printf("%-13s %5d %10.2f %14.2f %11.2f %11.2f %11.2f %12zu %10.1f\n", name.c_str(),
                pg.size(), local, perTensor, reducer, fusion, reducer - local, bytes, cycleUs);
  }
}

int run(int argc, char** argv) {
  Options options;
  CLI::App app{"c10d-ddp-bench: the data-parallel reducer on real models' gradients"};
  app.add_option("--model", options.model,
                 "resnet50, bert_base, gpt2_small, vgg16, mobilenet_v2, small1k, or all");
  app.add_flag("--json", options.json, "one JSON line per model and world size");
  app.add_flag("--sweep", options.sweep, "the reducer at bucket caps from 0.5 to 200 MiB");
  app.add_flag("--memory", options.memory,
               "bytes kept and peak per rank with DataParallelOptimizer and ZeRO stages 1 and 2");
  app.add_option("--steps", options.steps, "timed steps (the median is reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", options.warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--ns-per-byte", options.nsPerByte, "synthetic backward time per gradient byte")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--bucket-cap-mb", options.bucketCapMb, "the reducer's bucket cap (MiB)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--view", options.view,
               "gradients as views into the reducer's buckets (gradientAsBucketView): no copies");
  app.add_option("--hook", options.hook, "the reducer's communication hook")
      ->check(CLI::IsMember({"allreduce", "fp16", "bf16", "powersgd"}));
  app.add_option("--powersgd-rank", options.powerSgdRank, "PowerSGD's rank (--hook powersgd)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  std::vector<std::string> models;
  if (options.model == "all") {
    for (const ModelShapes& model : knownModels()) models.emplace_back(model.name);
    models.push_back("small1k");
  } else {
    shapesOf(options.model);  // an unknown name fails before any rank waits for another
    models.push_back(options.model);
  }
  auto pg = initProcessGroup();
  if (pg->rank() == 0 && !options.json) {
    std::printf(
        "# c10d-ddp-bench: %d ranks, backend %s, %.2f ns per gradient byte of backward, "
        "hook %s; times in ms (median over %d steps of the slowest rank)\n",
        pg->size(), pg->backend(DeviceType::CPU)->name().c_str(), options.nsPerByte,
        options.hook.c_str(), options.steps);
    if (options.memory) {
      std::printf("%-13s %5s %-9s %9s %9s %9s %11s %9s\n", "model", "world", "optimizer", "kept_mb",
                  "peak_mb", "state_mb", "gradient_mb", "step_ms");
    } else if (options.sweep) {
      std::printf("%-13s %5s %9s %10s %11s %11s\n", "model", "world", "cap_mb", "local", "reducer",
                  "exposed");
    } else {
      std::printf("%-13s %5s %10s %14s %11s %11s %11s %12s %10s\n", "model", "world", "local",
                  "per_tensor", "reducer", "fusion", "exposed", "bytes", "cycle_us");
    }
  }
  for (const std::string& model : models) runModel(*pg, options, model);
  pg->shutdown();
  return 0;
}

}  // namespace
}  // namespace c10d::bench

int main(int argc, char** argv) {
  try {
    return c10d::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "c10d-ddp-bench: %s\n", e.what());
    return 1;
  }
}
