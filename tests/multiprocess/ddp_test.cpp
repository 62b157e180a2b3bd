// DistributedDataParallel (c10d/training/DistributedDataParallel.hpp) across real processes:
// every gradient ends as the mean of the ranks' gradients, computed here independently, whatever
// order the ranks mark them in; unused and missing gradients; gradient accumulation; uneven
// inputs with Join; the communication hooks; parameter sync and its shape check. Gloo ranks are
// forked here (1 to 4); the Mpi cases run under mpirun (ctest: ddp_mpi_W<n>).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "c10d/FlightRecorder.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Half.hpp"
#include "c10d/core/HostBlockCache.hpp"
#include "c10d/training/DataParallelOptimizer.hpp"
#include "c10d/training/DistributedDataParallel.hpp"
#include "c10d/training/Join.hpp"
#include "c10d/training/PowerSgd.hpp"
#include "tests/support/MultiProcess.hpp"
#include "tests/support/RanksOnBackend.hpp"

namespace c10d::inline v1 {
namespace {

template <typename... Args>
std::string str(const Args&... args) {
  return detail::concat(args...);
}

using test::check;
using test::checkEq;
using test::RankEnv;

// The model: parameters of three dtypes and assorted sizes, so buckets of several kinds form.
struct Spec {
  ScalarType dtype;
  int64_t numel;
};
const std::vector<Spec> kModel = {
    {ScalarType::Float32, 300}, {ScalarType::Float64, 17},   {ScalarType::Float32, 1},
    {ScalarType::BFloat16, 64}, {ScalarType::Float32, 1000}, {ScalarType::Float64, 250},
    {ScalarType::Float32, 33},  {ScalarType::BFloat16, 5},
};

// Rank r's gradient of parameter k, element e, in backward `step`: multiples of 1/16, exact in
// every dtype here.
double gradValue(int rank, size_t k, int64_t e, int step) {
  return (rank + 1) * 0.25 + static_cast<double>(k) * 0.125 + static_cast<double>(e % 5) * 0.0625 +
         step;
}

double load(const Tensor& t, int64_t e) {
  switch (t.dtype()) {
    case ScalarType::Float32:
      return t.data<float>()[e];
    case ScalarType::Float64:
      return t.data<double>()[e];
    case ScalarType::BFloat16:
      return static_cast<float>(t.data<BFloat16>()[e]);
    default:
      throw std::logic_error("load: dtype");
  }
}

void store(const Tensor& t, int64_t e, double v) {
  switch (t.dtype()) {
    case ScalarType::Float32:
      t.data<float>()[e] = static_cast<float>(v);
      break;
    case ScalarType::Float64:
      t.data<double>()[e] = v;
      break;
    case ScalarType::BFloat16:
      t.data<BFloat16>()[e] = BFloat16(static_cast<float>(v));
      break;
    default:
      throw std::logic_error("store: dtype");
  }
}

double tolerance(ScalarType dtype) {
  // bfloat16 keeps 8 bits: each rank's gradient divided before the sum rounds once per rank.
  return dtype == ScalarType::BFloat16 ? 2e-2 : dtype == ScalarType::Float64 ? 1e-12 : 1e-6;
}

struct Model {
  std::vector<Tensor> values;
  std::vector<Tensor> grads;  // the framework's (copy mode)
  std::vector<DataParallelParameter> parameters(bool asView) const {
    std::vector<DataParallelParameter> out;
    for (size_t k = 0; k < values.size(); ++k) {
      out.push_back({values[k], asView ? Tensor() : grads[k], "p" + std::to_string(k)});
    }
    return out;
  }
};

Model makeModel(int rank) {
  Model model;
  for (const Spec& spec : kModel) {
    model.values.push_back(Tensor::empty({spec.numel}, spec.dtype));
    model.grads.push_back(Tensor::empty({spec.numel}, spec.dtype));
    for (int64_t e = 0; e < spec.numel; ++e) store(model.values.back(), e, rank * 100 + e);
  }
  return model;
}

// Writes this rank's gradient of parameter k into ddp's storage for it.
void produce(DistributedDataParallel& ddp, int rank, size_t k, int step, bool accumulate = false) {
  Tensor g = ddp.gradient(k);
  for (int64_t e = 0; e < g.numel(); ++e) {
    store(g, e, (accumulate ? load(g, e) : 0.0) + gradValue(rank, k, e, step));
  }
}

// Checks parameter k's gradient is the mean over ranks of gradValue (summed over steps).
void expectMean(DistributedDataParallel& ddp, size_t k, const std::vector<int>& ranks,
                const std::vector<int>& steps, double divisor, const std::string& what) {
  Tensor g = ddp.gradient(k);
  for (int64_t e = 0; e < g.numel(); ++e) {
    double expected = 0;
    for (int r : ranks)
      for (int s : steps) expected += gradValue(r, k, e, s);
    expected /= divisor;
    double actual = load(g, e);
    if (std::abs(actual - expected) > tolerance(g.dtype()) * std::max(1.0, std::abs(expected))) {
      test::fail(str(what, ": parameter ", k, " (", g.dtype(), ") element ", e, " is ", actual,
                     ", expected ", expected));
      return;
    }
  }
}

std::vector<int> allRanks(int size) {
  std::vector<int> ranks(size);
  for (int r = 0; r < size; ++r) ranks[r] = r;
  return ranks;
}

// The order rank marks its gradients in during step: a different permutation per rank and step.
std::vector<size_t> markOrder(int rank, int step) {
  std::vector<size_t> order(kModel.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::mt19937 random(static_cast<unsigned>(rank * 31 + step));
  std::shuffle(order.begin(), order.end(), random);
  return order;
}

class DataParallel : public test::RanksOnBackend {
 protected:
  DataParallel() : RanksOnBackend("ddp_mpi_W") {}
};

// Small buckets, so the model spans many of them.
DataParallelOptions smallBuckets() {
  DataParallelOptions options;
  options.firstBucketBytes = 64;
  options.bucketCapBytes = 1024;
  return options;
}

void averagesInAnyOrder(RankEnv& env, bool asView, bool transient = false) {
  Model model = makeModel(env.rank);
  DataParallelOptions options = smallBuckets();
  options.gradientAsBucketView = asView;
  options.transientBuckets = transient;
  DistributedDataParallel ddp(env.pg, model.parameters(asView), options);
  const auto before = ddp.bucketLayout();
  for (int step = 0; step < 3; ++step) {
    for (size_t k : markOrder(env.rank, step)) {
      produce(ddp, env.rank, k, step);
      ddp.markGradReady(k);
    }
    ddp.finalizeBackward();
    for (size_t k = 0; k < kModel.size(); ++k) {
      expectMean(ddp, k, allRanks(env.size), {step}, env.size, str("step ", step));
    }
  }
  if (env.size > 1) {
    // Rank 0's first order decides the layout from the second backward on.
    check(ddp.bucketLayout() != before, "the buckets were rebuilt from rank 0's ready order");
  }
}

TEST_P(DataParallel, GradientsAreTheMeanWhateverOrderRanksMarkThem) {
  runOnRanks([](RankEnv& env) { averagesInAnyOrder(env, false); });
}

TEST_P(DataParallel, GradientsAsBucketViewsAreTheMeanToo) {
  runOnRanks([](RankEnv& env) { averagesInAnyOrder(env, true); });
}

// Transient buckets: the same means, from a buffer that exists only while the backward reduces
// it; between backwards the reducer holds no bucket memory (the host allocator's live count is
// back where it was); a hook completing with no tensors leaves the gradients as they were.
TEST_P(DataParallel, TransientBucketsGiveTheSameMeansAndHoldNoMemoryBetweenBackwards) {
  runOnRanks([](RankEnv& env) {
    averagesInAnyOrder(env, false, /*transient=*/true);

    // Gradients of 1 MiB and more, so the bucket memory is not lost in the small allocations.
    const int64_t n = int64_t{1} << 18;
    std::vector<DataParallelParameter> params;
    for (int k = 0; k < 4; ++k) {
      params.push_back({Tensor::zeros({n}, ScalarType::Float32),
                        Tensor::empty({n}, ScalarType::Float32), "big" + std::to_string(k)});
    }
    auto& cache = detail::HostBlockCache::process();
    for (bool consume : {false, true}) {
      DataParallelOptions options;
      options.transientBuckets = true;
      options.bucketCapBytes = 2 * n * sizeof(float);  // two buckets
      options.firstBucketBytes = options.bucketCapBytes;
      size_t hookBuckets = 0;
      if (consume) {
        options.commHook = [&hookBuckets](ProcessGroup& group, GradBucket& bucket) {
          ++hookBuckets;
          auto work = group.allreduce(bucket.buffer, {.reduceOp = bucket.average});
          return work->getFuture()->then([](Future&) { return std::vector<Tensor>{}; });
        };
      }
      DistributedDataParallel ddp(env.pg, params, options);
      for (int step = 0; step < 2; ++step) {
        for (size_t k = 0; k < params.size(); ++k) {
          std::fill_n(params[k].grad.data<float>(), n, static_cast<float>(env.rank + 1));
        }
        const size_t before = cache.liveBytes();
        cache.resetPeak();
        for (size_t k = params.size(); k-- > 0;) ddp.markGradReady(k);
        ddp.finalizeBackward();
        const size_t bucketBytes = params.size() * n * sizeof(float);
        if (env.size > 1) {
          check(cache.peakLiveBytes() >= before + bucketBytes / 2,
                str("step ", step, ": a bucket's buffer is allocated during the backward (peak ",
                    cache.peakLiveBytes(), ", before ", before, ")"));
        }
        // The op's worker may hold its finished work (and so the bucket) a moment longer.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (cache.liveBytes() > before + 4096 && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        // A little slack for the group's own small tensors.
        check(cache.liveBytes() <= before + 4096,
              str("step ", step, ", consume ", consume, ": after finalizeBackward ",
                  cache.liveBytes(), " bytes live, ", before, " before it"));
        const float mean = (env.size + 1) / 2.0f;
        const float want = consume && env.size > 1 ? static_cast<float>(env.rank + 1) : mean;
        checkEq(want, params[0].grad.data<float>()[n - 1],
                consume ? "a consuming hook leaves the gradient as marked"
                        : "the average copied out of the transient bucket");
      }
      if (consume && env.size > 1) checkEq(size_t{4}, hookBuckets, "hook calls (2 buckets x 2)");
    }
  });
}

TEST_P(DataParallel, ThreadsMayMarkGradientsConcurrently) {
  runOnRanks([](RankEnv& env) {
    Model model = makeModel(env.rank);
    DistributedDataParallel ddp(env.pg, model.parameters(false), smallBuckets());
    for (int step = 0; step < 3; ++step) {
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
          for (size_t k = t; k < kModel.size(); k += 4) {
            produce(ddp, env.rank, k, step);
            ddp.markGradReady(k);
          }
        });
      }
      for (auto& t : threads) t.join();
      ddp.finalizeBackward();
      for (size_t k = 0; k < kModel.size(); ++k) {
        expectMean(ddp, k, allRanks(env.size), {step}, env.size, str("step ", step));
      }
    }
  });
}

TEST_P(DataParallel, UnusedParametersContributeZerosAndOnesUnusedEverywhereStayUntouched) {
  runOnRanks([](RankEnv& env) {
    for (bool asView : {false, true}) {
      Model model = makeModel(env.rank);
      DataParallelOptions options = smallBuckets();
      options.findUnusedParameters = true;
      options.gradientAsBucketView = asView;
      DistributedDataParallel ddp(env.pg, model.parameters(asView), options);
      // Parameter 1 is unused on rank 0, parameter 2 on every rank (its gradient holds 7s).
      for (size_t k = 0; k < kModel.size(); ++k) {
        if (k == 2 || (k == 1 && env.rank == 0)) {
          Tensor g = ddp.gradient(k);
          for (int64_t e = 0; e < g.numel(); ++e) store(g, e, 7);
          continue;
        }
        produce(ddp, env.rank, k, 0);
        ddp.markGradReady(k);
      }
      ddp.finalizeBackward();
      std::string what = asView ? "as bucket views" : "copied";
      if (env.size == 1) {
        checkEq(7.0, load(ddp.gradient(1), 0), what + ": alone, an unused gradient stays");
      } else {
        std::vector<int> others;
        for (int r = 1; r < env.size; ++r) others.push_back(r);
        expectMean(ddp, 1, others, {0}, env.size, what + ", parameter 1 unused on rank 0");
      }
      checkEq(7.0, load(ddp.gradient(2), 0), what + ": a gradient no rank used stays untouched");
      expectMean(ddp, 0, allRanks(env.size), {0}, env.size, what + ", parameter 0");
    }
  });
}

TEST_P(DataParallel, AMissingGradientIsAnErrorOnEveryRankAndTheNextBackwardWorks) {
  runOnRanks([](RankEnv& env) {
    Model model = makeModel(env.rank);
    DistributedDataParallel ddp(env.pg, model.parameters(false), smallBuckets());
    for (size_t k = 0; k < kModel.size(); ++k) {
      if (k == 3 && env.rank == env.size - 1) continue;  // the last rank forgets parameter 3
      produce(ddp, env.rank, k, 0);
      ddp.markGradReady(k);
    }
    test::expectThrows<InvalidArgument>(
        [&] { ddp.finalizeBackward(); }, "finalize with a missing gradient",
        {str("3 'p3' (ready on ", env.size - 1, " of ", env.size, " ranks)"),
         "findUnusedParameters"});
    for (size_t k = 0; k < kModel.size(); ++k) {
      produce(ddp, env.rank, k, 1);
      ddp.markGradReady(k);
    }
    ddp.finalizeBackward();
    for (size_t k = 0; k < kModel.size(); ++k) {
      expectMean(ddp, k, allRanks(env.size), {1}, env.size, "the backward after the error");
    }
  });
}

TEST_P(DataParallel, MisuseIsRefusedWithItsReason) {
  runOnRanks([](RankEnv& env) {
    Model model = makeModel(env.rank);
    DistributedDataParallel ddp(env.pg, model.parameters(false), smallBuckets());
    test::expectThrows<InvalidArgument>([&] { ddp.markGradReady(kModel.size()); },
                                        "an index out of range", {"markGradReady(8)", "8 param"});
    produce(ddp, env.rank, 0, 0);
    ddp.markGradReady(0);
    test::expectThrows<InvalidArgument>([&] { ddp.markGradReady(0); }, "a gradient marked twice",
                                        {"0 'p0'", "twice"});
    for (size_t k = 1; k < kModel.size(); ++k) {
      produce(ddp, env.rank, k, 0);
      ddp.markGradReady(k);
    }
    ddp.finalizeBackward();

    Tensor ints = Tensor::zeros({4}, ScalarType::Int32);
    test::expectThrows<InvalidArgument>(
        [&] {
          DistributedDataParallel bad(env.pg, {{ints, ints, "counts"}});
        },
        "an integer parameter", {"'counts'", "floating point"});
    Tensor value = Tensor::zeros({4}, ScalarType::Float32);
    Tensor shorter = Tensor::zeros({3}, ScalarType::Float32);
    test::expectThrows<InvalidArgument>(
        [&] {
          DistributedDataParallel bad(env.pg, {{value, shorter, "w"}});
        },
        "a gradient of another size", {"'w'", "float32[3]"});
    Tensor other = Tensor::zeros({4}, ScalarType::Float32);
    Tensor third = Tensor::zeros({4}, ScalarType::Float32);
    test::expectThrows<InvalidArgument>(
        [&] {
          DistributedDataParallel bad(env.pg, {{value, other, "w"}, {value, third, "v"}});
        },
        "one tensor registered twice", {"'v' shares its memory with parameter 0 'w'"});
    DataParallelOptions view;
    view.gradientAsBucketView = true;
    test::expectThrows<InvalidArgument>(
        [&] {
          DistributedDataParallel bad(env.pg, {{value, value, "w"}}, view);
        },
        "a gradient given with gradientAsBucketView", {"gradientAsBucketView"});
    view.transientBuckets = true;
    test::expectThrows<InvalidArgument>(
        [&] {
          DistributedDataParallel bad(env.pg, {{value, Tensor(), "w"}}, view);
        },
        "transient buckets that would hold the gradients", {"transientBuckets"});
    DataParallelOptions transient;
    transient.transientBuckets = true;
    transient.commHook = [](ProcessGroup&, GradBucket& bucket) {
      auto done = std::make_shared<Future>();
      done->markCompleted({Tensor::zeros({bucket.buffer.numel() + 1}, bucket.buffer.dtype())});
      return done;
    };
    DistributedDataParallel lying(env.pg, {{value, other, "w"}}, transient);
    lying.markGradReady(0);
    if (env.size > 1) {
      test::expectThrows<InvalidArgument>([&] { lying.finalizeBackward(); },
                                          "a hook completing with a tensor of another size",
                                          {"bucket 0", "float32[5]", "4 elements"});
    }
  });
}

TEST_P(DataParallel, NoSyncAccumulatesAndTheNextBackwardReducesOncePerBucket) {
  runOnRanks([](RankEnv& env) {
    Model model = makeModel(env.rank);
    DataParallelOptions options = smallBuckets();
    options.gradientAsBucketView = true;
    DistributedDataParallel ddp(env.pg, model.parameters(true), options);
    const FlightRecorder* recorder = env.pg.flightRecorder();
    if (!check(recorder != nullptr, "the flight recorder is on")) return;
    // A first backward settles the layout (its rebuild is a collective of its own).
    for (size_t k = 0; k < kModel.size(); ++k) {
      produce(ddp, env.rank, k, 0);
      ddp.markGradReady(k);
    }
    ddp.finalizeBackward();
    const size_t buckets = ddp.bucketLayout().size();
    const size_t atStart = recorder->entries().size();
    {
      auto scope = ddp.noSync();
      for (int step : {1, 2}) {
        for (size_t k = 0; k < kModel.size(); ++k) {
          produce(ddp, env.rank, k, step, /*accumulate=*/step == 2);
          ddp.markGradReady(k);
        }
        ddp.finalizeBackward();
      }
    }
    checkEq(atStart, recorder->entries().size(), "collectives during the no-sync backwards");
    for (size_t k = 0; k < kModel.size(); ++k) {
      produce(ddp, env.rank, k, 3, /*accumulate=*/true);
      ddp.markGradReady(k);
    }
    ddp.finalizeBackward();
    if (env.size > 1) {
      // One allreduce per bucket, and the one that counts which gradients each rank marked.
      checkEq(atStart + buckets + 1, recorder->entries().size(),
              "collectives of the synchronised backward");
    }
    for (size_t k = 0; k < kModel.size(); ++k) {
      expectMean(ddp, k, allRanks(env.size), {1, 2, 3}, env.size, "accumulated over 3 backwards");
    }
  });
}

// The first backward under NoSync, its scope closed before finalizeBackward, and a gradient
// produced only in that backward: it still counts as used, and nothing was sent for it.
TEST_P(DataParallel, ANoSyncBackwardIsDecidedAtItsFirstMarkAndItsGradientsCount) {
  runOnRanks([](RankEnv& env) {
    for (bool asView : {false, true}) {
      Model model = makeModel(env.rank);
      DataParallelOptions options = smallBuckets();
      options.gradientAsBucketView = asView;
      options.findUnusedParameters = true;
      DistributedDataParallel ddp(env.pg, model.parameters(asView), options);
      {
        auto scope = ddp.noSync();
        for (size_t k = 0; k < kModel.size(); ++k) {
          produce(ddp, env.rank, k, 0);
          ddp.markGradReady(k);
        }
      }
      ddp.finalizeBackward();  // the scope is gone, but this backward began inside it
      for (size_t k = 0; k < kModel.size(); ++k) {
        if (k == 2) continue;  // produced in the no-sync backward only
        produce(ddp, env.rank, k, 1, /*accumulate=*/true);
        ddp.markGradReady(k);
      }
      ddp.finalizeBackward();
      std::string what = asView ? "as bucket views" : "copied";
      for (size_t k = 0; k < kModel.size(); ++k) {
        expectMean(ddp, k, allRanks(env.size),
                   k == 2 ? std::vector<int>{0} : std::vector<int>{0, 1}, env.size,
                   what + ", after a first backward under NoSync");
      }
      test::expectThrows<InvalidArgument>([&] { ddp.finalizeBackward(); }, "finalizeBackward twice",
                                          {"called again"});
    }
  });
}

TEST_P(DataParallel, DivideByInitialWorldSizeWithJoin) {
  runOnRanks([](RankEnv& env) {
    const int batches[] = {3, 1, 2, 2};
    Model model = makeModel(env.rank);
    DataParallelOptions options = smallBuckets();
    options.divideByInitialWorldSize = true;
    DistributedDataParallel ddp(env.pg, model.parameters(false), options);
    Join join(env.pg);
    for (int step = 0; step < batches[env.rank]; ++step) {
      std::vector<int> training;
      for (int r = 0; r < env.size; ++r)
        if (batches[r] > step) training.push_back(r);
      ddp.prepareForBackward(join.step());
      for (size_t k = 0; k < kModel.size(); ++k) {
        produce(ddp, env.rank, k, step);
        ddp.markGradReady(k);
      }
      ddp.finalizeBackward();
      for (size_t k = 0; k < kModel.size(); ++k) {
        expectMean(ddp, k, training, {step}, env.size,
                   str("step ", step, ", divided by ", env.size));
      }
    }
    join.finish([&] { ddp.shadowBackward(); });
  });
}

TEST_P(DataParallel, UnevenInputsWithJoinAverageOverTheRanksStillTraining) {
  runOnRanks([](RankEnv& env) {
    const int batches[] = {10, 7, 4, 6};
    Model model = makeModel(env.rank);
    DistributedDataParallel ddp(env.pg, model.parameters(false), smallBuckets());
    Join join(env.pg);
    // The ranks with at least `step + 1` batches are the ones training in step.
    auto training = [&](int step) {
      std::vector<int> ranks;
      for (int r = 0; r < env.size; ++r)
        if (batches[r] > step) ranks.push_back(r);
      return ranks;
    };
    for (int step = 0; step < batches[env.rank]; ++step) {
      int active = join.step();
      checkEq(static_cast<int>(training(step).size()), active, "ranks active in the step");
      ddp.prepareForBackward(active);
      for (size_t k : markOrder(env.rank, step)) {
        produce(ddp, env.rank, k, step);
        ddp.markGradReady(k);
      }
      ddp.finalizeBackward();
      for (size_t k = 0; k < kModel.size(); ++k) {
        expectMean(ddp, k, training(step), {step}, active, str("step ", step));
      }
    }
    join.finish([&] { ddp.shadowBackward(); });
  });
}

TEST_P(DataParallel, CompressionHooksHalveTheBytesAndKeepTheMean) {
  runOnRanks([](RankEnv& env) {
    for (CommHook hook : {CommHook(fp16CompressHook), CommHook(bf16CompressHook)}) {
      std::vector<Tensor> values, grads;
      for (int k = 0; k < 3; ++k) {
        values.push_back(Tensor::zeros({500}, ScalarType::Float32));
        grads.push_back(Tensor::zeros({500}, ScalarType::Float32));
      }
      std::vector<DataParallelParameter> parameters;
      for (int k = 0; k < 3; ++k) parameters.push_back({values[k], grads[k], ""});
      DataParallelOptions options;
      options.commHook = hook;
      DistributedDataParallel ddp(env.pg, parameters, options);
      for (size_t k = 0; k < 3; ++k) {
        for (int e = 0; e < 500; ++e) grads[k].data<float>()[e] = gradValue(env.rank, k, e, 0);
        ddp.markGradReady(k);
      }
      ddp.finalizeBackward();
      for (size_t k = 0; k < 3; ++k) {
        for (int e = 0; e < 500; e += 37) {
          double expected = 0;
          for (int r = 0; r < env.size; ++r) expected += gradValue(r, k, e, 0);
          expected /= env.size;
          double actual = grads[k].data<float>()[e];
          check(std::abs(actual - expected) <= 1e-2 * expected,
                str("compressed mean of parameter ", k, " element ", e, ": ", actual, ", expected ",
                    expected));
        }
      }
    }
    // The flight recorder saw the compressed dtypes on the wire.
    bool sawHalf = false, sawBf16 = false;
    for (const auto& entry : env.pg.flightRecorder()->entries()) {
      sawHalf |= entry.op.dtype == ScalarType::Float16;
      sawBf16 |= entry.op.dtype == ScalarType::BFloat16;
    }
    if (env.size > 1) check(sawHalf && sawBf16, "the buckets travelled as float16 and bfloat16");
  });
}

// Rank-1 gradients u v_r^T with the same u on every rank have a rank-1 mean, which rank-1
// PowerSGD recovers exactly (up to rounding); the bias (one-dimensional) goes uncompressed. After
// the first backward the buckets are rebuilt; the hook's state follows them.
TEST_P(DataParallel, PowerSgdRecoversARankOneMeanAndAveragesTheRest) {
  runOnRanks([](RankEnv& env) {
    const int64_t n = 8, m = 6;
    std::vector<Tensor> values = {Tensor::zeros({n, m}, ScalarType::Float32),
                                  Tensor::zeros({m}, ScalarType::Float32),
                                  Tensor::zeros({n, m}, ScalarType::Float64)};
    std::vector<Tensor> grads;
    std::vector<DataParallelParameter> parameters;
    for (size_t k = 0; k < values.size(); ++k) {
      grads.push_back(Tensor::zeros(values[k].sizes(), values[k].dtype()));
      parameters.push_back({values[k], grads[k], "p" + std::to_string(k)});
    }
    PowerSgd powerSgd({.rank = 1, .seed = 7});
    DataParallelOptions options = smallBuckets();
    options.commHook = powerSgd.hook();
    DistributedDataParallel ddp(env.pg, parameters, options);
    auto u = [](int64_t i) { return 1.0 + 0.5 * i; };
    auto v = [](int rank, int64_t j, int step) { return (rank + 1) * 0.25 + j * 0.125 + step; };
    for (int step = 0; step < 3; ++step) {
      for (size_t k = 0; k < values.size(); ++k) {
        for (int64_t e = 0; e < grads[k].numel(); ++e) {
          double g = grads[k].dim() == 2 ? u(e / m) * v(env.rank, e % m, step)
                                         : gradValue(env.rank, k, e, step);
          store(grads[k], e, g);
        }
        ddp.markGradReady(k);
      }
      ddp.finalizeBackward();
      for (size_t k = 0; k < values.size(); ++k) {
        for (int64_t e = 0; e < grads[k].numel(); ++e) {
          double expected = 0;
          for (int r = 0; r < env.size; ++r) {
            expected +=
                grads[k].dim() == 2 ? u(e / m) * v(r, e % m, step) : gradValue(r, k, e, step);
          }
          expected /= env.size;
          double actual = load(grads[k], e);
          if (std::abs(actual - expected) > 1e-4 * std::max(1.0, std::abs(expected))) {
            test::fail(str("step ", step, " parameter ", k, " element ", e, ": PowerSGD gave ",
                           actual, ", the mean is ", expected));
            break;
          }
        }
      }
    }
  });
}

TEST_P(DataParallel, AUserHookSeesEveryBucketInOrder) {
  runOnRanks([](RankEnv& env) {
    Model model = makeModel(env.rank);
    std::vector<size_t> seen;
    DataParallelOptions options = smallBuckets();
    options.commHook = [&](ProcessGroup& group, GradBucket& bucket) {
      seen.push_back(bucket.index);
      // Completes with a tensor of its own: the reducer copies it into the bucket.
      Tensor result = Tensor::empty(bucket.buffer.sizes(), bucket.buffer.dtype());
      copyTensor(result, bucket.buffer);
      group.allreduce(result, {.reduceOp = bucket.average})->wait();
      auto future = std::make_shared<Future>();
      future->markCompleted({result});
      return future;
    };
    DistributedDataParallel ddp(env.pg, model.parameters(false), options);
    for (size_t k : markOrder(env.rank, 0)) {
      produce(ddp, env.rank, k, 0);
      ddp.markGradReady(k);
    }
    ddp.finalizeBackward();
    if (env.size > 1) {
      std::vector<size_t> expected(seen.size());
      for (size_t b = 0; b < expected.size(); ++b) expected[b] = b;
      checkEq(expected, seen, "the buckets the hook saw");
      checkEq(ddp.bucketLayout().size() > 0, !seen.empty(), "the hook ran");
    }
    for (size_t k = 0; k < kModel.size(); ++k) {
      expectMean(ddp, k, allRanks(env.size), {0}, env.size, "through the user hook");
    }
  });
}

// Horovod's recipe: averaged gradients, then the same Adam step on every rank. The parameters
// must end bit-identical on every rank, and equal to Adam stepped here on the mean gradients.
TEST_P(DataParallel, DataParallelOptimizerKeepsEveryRanksParametersIdentical) {
  runOnRanks([](RankEnv& env) {
    const std::vector<int64_t> sizes = {7, 300, 1};
    std::vector<Tensor> values, grads, reference;
    std::vector<DataParallelParameter> parameters;
    for (size_t k = 0; k < sizes.size(); ++k) {
      ScalarType dtype = k == 1 ? ScalarType::Float64 : ScalarType::Float32;
      values.push_back(Tensor::empty({sizes[k]}, dtype));
      grads.push_back(Tensor::empty({sizes[k]}, dtype));
      reference.push_back(Tensor::empty({sizes[k]}, dtype));
      for (int64_t e = 0; e < sizes[k]; ++e) {
        store(values[k], e, env.rank * 10 + e * 0.01);  // differs per rank until the sync
        store(reference[k], e, e * 0.01);               // rank 0's values
      }
      parameters.push_back({values[k], grads[k], "p" + std::to_string(k)});
    }
    DistributedDataParallel ddp(env.pg, parameters, smallBuckets());
    DataParallelOptimizer optimizer(ddp, OptimizerSpec::adam(0.01));
    auto local = makeOptimizer(OptimizerSpec::adam(0.01));
    ddp.syncParameters();
    for (int step = 0; step < 3; ++step) {
      std::vector<Tensor> meanGrads;
      for (size_t k = 0; k < sizes.size(); ++k) {
        for (int64_t e = 0; e < sizes[k]; ++e) store(grads[k], e, gradValue(env.rank, k, e, step));
        ddp.markGradReady(k);
        meanGrads.push_back(Tensor::empty({sizes[k]}, values[k].dtype()));
        for (int64_t e = 0; e < sizes[k]; ++e) {
          double sum = 0;
          for (int r = 0; r < env.size; ++r) sum += gradValue(r, k, e, step);
          store(meanGrads.back(), e, sum / env.size);
        }
      }
      check(optimizer.step(), "a synchronised backward steps");
      local->step(reference, meanGrads);
    }
    for (size_t k = 0; k < sizes.size(); ++k) {
      Tensor highest = Tensor::empty({sizes[k]}, values[k].dtype());
      Tensor lowest = Tensor::empty({sizes[k]}, values[k].dtype());
      copyTensor(highest, values[k]);
      copyTensor(lowest, values[k]);
      env.pg.allreduce(highest, {.reduceOp = ReduceOp::MAX})->wait();
      env.pg.allreduce(lowest, {.reduceOp = ReduceOp::MIN})->wait();
      for (int64_t e = 0; e < sizes[k]; ++e) {
        double mine = load(values[k], e), expected = load(reference[k], e);
        if (load(highest, e) != mine || load(lowest, e) != mine ||
            std::abs(mine - expected) > 1e-5 * std::max(1.0, std::abs(expected))) {
          test::fail(str("parameter ", k, " element ", e, ": ", mine, " here, max ",
                         load(highest, e), " min ", load(lowest, e), " over ranks, Adam on the ",
                         "mean gradients gives ", expected));
          break;
        }
      }
    }
    {
      auto scope = ddp.noSync();
      for (size_t k = 0; k < sizes.size(); ++k) ddp.markGradReady(k);
      check(!optimizer.step(), "a no-sync backward takes no step");
    }
    for (size_t k = 0; k < sizes.size(); ++k) ddp.markGradReady(k);
    check(optimizer.step(), "the next synchronised backward steps");
  });
}

TEST_P(DataParallel, SyncParametersBroadcastsRankZerosValuesAndChecksShapes) {
  runOnRanks([](RankEnv& env) {
    Model model = makeModel(env.rank);
    Tensor buffer = Tensor::empty({10}, ScalarType::Int64);
    for (int e = 0; e < 10; ++e) buffer.data<int64_t>()[e] = env.rank * 1000 + e;
    DistributedDataParallel ddp(env.pg, model.parameters(false));
    ddp.syncParameters({buffer});
    for (size_t k = 0; k < kModel.size(); ++k) {
      for (int64_t e = 0; e < model.values[k].numel(); ++e) {
        if (load(model.values[k], e) != e) {
          test::fail(str("parameter ", k, " element ", e, " is ", load(model.values[k], e),
                         " after syncParameters, rank 0 has ", e));
          break;
        }
      }
    }
    checkEq(int64_t{9}, buffer.data<int64_t>()[9], "the buffer after syncParameters");
    if (env.size == 1) return;
    // The last rank registers parameter 1 with another size.
    std::vector<Tensor> values = {
        Tensor::zeros({4}, ScalarType::Float32),
        Tensor::zeros({env.rank == env.size - 1 ? 3 : 4}, ScalarType::Float32)};
    std::vector<Tensor> grads = {Tensor::zeros({4}, ScalarType::Float32),
                                 Tensor::zeros({values[1].numel()}, ScalarType::Float32)};
    DistributedDataParallel odd(env.pg, {{values[0], grads[0], "a"}, {values[1], grads[1], "b"}});
    test::expectThrows<InvalidArgument>(
        [&] { odd.syncParameters(); }, "syncParameters with a parameter of another shape",
        {str("parameter 1 'b' is float32[3] on rank ", env.size - 1, " but float32[4] on rank 0")});
  });
}

INSTANTIATE_TEST_SUITE_P(Gloo, DataParallel, ::testing::ValuesIn(test::worldSizes("gloo")),
                         test::worldSizeName);
INSTANTIATE_TEST_SUITE_P(Mpi, DataParallel, ::testing::ValuesIn(test::worldSizes("mpi")),
                         test::worldSizeName);

// ---- the layout, alone ----

TEST(DataParallelBuckets, FillInOrderOneKindPerBucketWithASmallFirstBucket) {
  std::vector<Tensor> p = {
      Tensor::zeros({100}, ScalarType::Float32),  // 400 B
      Tensor::zeros({100}, ScalarType::Float32),  // 400 B
      Tensor::zeros({10}, ScalarType::Float64),   // 80 B
      Tensor::zeros({300}, ScalarType::Float32),  // 1200 B: past the cap alone
      Tensor::zeros({100}, ScalarType::Float32),  // 400 B
  };
  using Layout = std::vector<std::vector<size_t>>;
  // First bucket of a kind up to 500 B, the others up to 1000 B.
  EXPECT_EQ(detail::assignBuckets(p, {4, 3, 2, 1, 0}, 500, 1000), (Layout{{4, 3}, {2}, {1, 0}}))
      << "float32: [4, 3] closes the first bucket; float64 [2] and float32 [1, 0] are left open";
  EXPECT_EQ(detail::assignBuckets(p, {0, 1, 2, 3, 4}, 500, 1000), (Layout{{0, 1}, {3}, {2}, {4}}));
  EXPECT_EQ(detail::assignBuckets(p, {0, 1, 2, 3, 4}, 1 << 20, 1 << 20),
            (Layout{{0, 1, 3, 4}, {2}}));
}

}  // namespace
}  // namespace c10d::inline v1
