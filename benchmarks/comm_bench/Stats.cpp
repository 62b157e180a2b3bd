#include "benchmarks/comm_bench/Stats.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "c10d/Work.hpp"
#include "c10d/core/ScalarType.hpp"

namespace commbench {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::vector<std::vector<double>> timeIterations(c10d::ProcessGroup& pg,
                                                const std::vector<Runner>& paths, int warmup,
                                                int iters) {
  std::vector<std::vector<double>> samples(paths.size());
  auto timed = [&](size_t p, int count) {
    for (int i = 0; i < warmup; ++i) paths[p]();
    // Without it a rank that left the warm-up early would charge its wait for the others to
    // its first timed iteration.
    pg.barrier()->wait();
    for (int i = 0; i < count; ++i) {
      Clock::time_point start = Clock::now();
      paths[p]();
      samples[p].push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
  };
  const int firstHalf = (iters + 1) / 2;
  for (size_t p = 0; p < paths.size(); ++p) timed(p, firstHalf);
  for (size_t p = paths.size(); p-- > 0;) timed(p, iters - firstHalf);
  return samples;
}

Stats summarize(const Bookkeeping& group, std::vector<double> samples) {
  const int ranks = group.pg.size();
  const auto iters = static_cast<int64_t>(samples.size());
  Tensor mine = Tensor::fromBlob(samples.data(), ScalarType::Float64, {iters});
  Tensor all = Tensor::empty({iters * ranks}, ScalarType::Float64);
  group.run(all, mine, [&](const Tensor& out, const Tensor& in) {
    return group.pg.allgatherIntoTensor(out, in);
  });
  const double* values = all.data<double>();

  Stats stats;
  stats.minUs = std::numeric_limits<double>::infinity();
  for (int r = 0; r < ranks; ++r) {
    double sum = 0.0;
    for (int64_t i = 0; i < iters; ++i) sum += values[r * iters + i];
    double average = sum / static_cast<double>(iters);
    stats.minUs = std::min(stats.minUs, average);
    stats.maxUs = std::max(stats.maxUs, average);
  }
  stats.timeUs = stats.maxUs;
  // Nearest-rank percentiles, by selection rather than a sort: the statistics then cost each
  // iteration a constant, so counting a run's instructions per op (callgrind) counts the op's.
  std::vector<double> pooled(values, values + iters * ranks);
  auto rankOf = [&](double p) {
    auto index = static_cast<size_t>(std::ceil(p * static_cast<double>(pooled.size())));
    return std::clamp<size_t>(index, 1, pooled.size()) - 1;
  };
  const size_t p50 = rankOf(0.50), p99 = rankOf(0.99);
  std::nth_element(pooled.begin(), pooled.begin() + p50, pooled.end());
  stats.p50Us = pooled[p50];
  // The 99th is among the elements after the median.
  std::nth_element(pooled.begin() + p50, pooled.begin() + p99, pooled.end());
  stats.p99Us = pooled[p99];
  return stats;
}

int64_t sumOverRanks(const Bookkeeping& group, int64_t value) {
  Tensor tensor = Tensor::empty({1}, ScalarType::Int64);
  *tensor.data<int64_t>() = value;
  group.run(tensor, tensor,
            [&](const Tensor& out, const Tensor&) { return group.pg.allreduce(out); });
  return *tensor.data<int64_t>();
}

}  // namespace commbench
