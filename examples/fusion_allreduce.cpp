// Horovod-style fusion with c10d::FusionQueue: every rank submits the same 16 named tensors for
// allreduce, each rank in its own shuffled order (as a dynamic graph might produce them), plus an
// allgather and a broadcast. The queue agrees with the other ranks which names are ready, fuses
// the allreduces and runs them in one agreed order, so every rank ends with the same, correct
// results. Run it with `c10drun --nproc-per-node 4 fusion_allreduce` (or under mpirun).
//
// Exits 0 only when every result equals the value computed here independently.

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ExampleUtils.hpp"
#include "c10d/training/FusionQueue.hpp"

namespace {

constexpr int kTensors = 16;

// Rank r's element e of tensor t: exact in float32, so the sums compare exactly.
float contribution(int rank, int tensor, int64_t e) {
  return static_cast<float>(rank + 1) * 0.5f + static_cast<float>(tensor) + (e % 4) * 0.25f;
}

void run(c10d::ProcessGroup& pg, examples::Checker& checks) {
  const int rank = pg.rank(), size = pg.size();
  c10d::FusionQueue queue(pg);
  std::vector<int> order(kTensors);
  for (int t = 0; t < kTensors; ++t) order[t] = t;
  std::mt19937 shuffle(static_cast<unsigned>(1234 + rank));  // a different order on every rank
  std::shuffle(order.begin(), order.end(), shuffle);

  std::vector<c10d::Tensor> tensors(kTensors);
  std::vector<std::shared_ptr<c10d::Future>> futures;
  for (int t : order) {
    tensors[t] = c10d::Tensor::empty({100 + 50 * t}, c10d::ScalarType::Float32);
    examples::fill<float>(tensors[t], [&](int64_t e) { return contribution(rank, t, e); });
    futures.push_back(
        queue.allreduce("layer" + std::to_string(t) + ".grad", tensors[t], c10d::ReduceOp::SUM));
  }
  c10d::Tensor mine = c10d::Tensor::empty({2}, c10d::ScalarType::Int64);
  c10d::Tensor everyone = c10d::Tensor::empty({2 * size}, c10d::ScalarType::Int64);
  mine.data<int64_t>()[0] = rank;
  mine.data<int64_t>()[1] = rank * rank;
  futures.push_back(queue.allgather("ranks", mine, everyone));
  c10d::Tensor seed = c10d::Tensor::empty({1}, c10d::ScalarType::Int64);
  seed.data<int64_t>()[0] = rank == 0 ? 20261124 : -1;
  futures.push_back(queue.broadcast("seed", seed, 0));
  for (auto& future : futures) future->wait();

  for (int t = 0; t < kTensors; ++t) {
    checks.expectValues<float>(
        tensors[t],
        [&](int64_t e) {
          float sum = 0;
          for (int r = 0; r < size; ++r) sum += contribution(r, t, e);
          return sum;
        },
        "allreduce of layer" + std::to_string(t) + ".grad");
  }
  checks.expectValues<int64_t>(
      everyone, [](int64_t i) { return i % 2 == 0 ? i / 2 : (i / 2) * (i / 2); }, "allgather");
  checks.expect(seed.data<int64_t>()[0] == 20261124, "broadcast seed is ", seed.data<int64_t>()[0]);
  queue.shutdown();
  c10d::FusionStats stats = queue.stats();
  std::printf(
      "rank %d: %d tensors submitted in its own order; %llu collectives, %llu cycles "
      "(%llu of them exchanging new names); results checked\n",
      rank, kTensors + 2, static_cast<unsigned long long>(stats.collectives),
      static_cast<unsigned long long>(stats.cycles),
      static_cast<unsigned long long>(stats.exchanges));
}

}  // namespace

int main() {
  return examples::runExample("fusion_allreduce", run);
}
