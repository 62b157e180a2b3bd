// One call of each collective on small float tensors: broadcast, scatter, gather, reduce (SUM
// and MAX), allgather, reduce_scatter and alltoall. Each rank fills its inputs from its rank, so
// the expected result of every collective can be computed locally and compared element by
// element. Rank 0 prints one line per collective (with its own verdict); every rank prints a
// summary of its checks.
// Run it with `c10drun --nproc-per-node 4 collectives_tour` (any number of ranks works).
//
// Exits 0 only when every check below passed on this rank.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ExampleUtils.hpp"

namespace {

constexpr int64_t kCount = 6;  // elements per tensor (per rank's chunk where there are chunks)

c10d::Tensor make(float fillValue = 0.0f) {
  c10d::Tensor tensor = examples::empty({kCount}, c10d::ScalarType::Float32);
  examples::fill<float>(tensor, [&](int64_t) { return fillValue; });
  return tensor;
}

std::vector<c10d::Tensor> makeList(int count, float fillValue = 0.0f) {
  std::vector<c10d::Tensor> tensors;
  for (int i = 0; i < count; ++i) tensors.push_back(make(fillValue));
  return tensors;
}

// Pseudo-random per (rank, i) so that MAX picks different ranks for different elements.
float maxInput(int rank, int64_t i) {
  return static_cast<float>((rank * 7 + i * 5) % 11);
}

void run(c10d::ProcessGroup& pg, examples::Checker& checks) {
  const int rank = pg.rank();
  const int size = pg.size();
  int done = 0;
  int passed = 0;
  // Rank 0 narrates, with its own verdict; every rank counts and prints its summary at the end.
  auto report = [&](const char* collective, bool ok, const char* what) {
    ++done;
    passed += ok ? 1 : 0;
    if (rank == 0) std::printf("%-15s %s %s\n", collective, ok ? "ok   " : "WRONG", what);
  };

  // broadcast: rank 0's values overwrite everyone's.
  c10d::Tensor tensor = make(-1.0f);
  if (rank == 0) examples::fill<float>(tensor, [](int64_t i) { return 10.0f + i; });
  pg.broadcast(tensor, {.rootRank = 0})->wait();
  report("broadcast",
         checks.expectValues<float>(
             tensor, [](int64_t i) { return 10.0f + i; }, "broadcast"),
         "every rank holds rank 0's [10, 11, ...]");

  // scatter: rank 0 hands chunk r to rank r.
  std::vector<c10d::Tensor> chunks;
  if (rank == 0) {
    chunks = makeList(size);
    for (int r = 0; r < size; ++r) {
      examples::fill<float>(chunks[r], [&](int64_t i) { return 100.0f * r + i; });
    }
  }
  tensor = make(-1.0f);
  pg.scatter(tensor, chunks, {.rootRank = 0})->wait();
  report("scatter",
         checks.expectValues<float>(
             tensor, [&](int64_t i) { return 100.0f * rank + i; }, "scatter"),
         "rank r received [100 r, 100 r + 1, ...]");

  // gather: rank 0 collects every rank's tensor; the others pass no outputs.
  tensor = make();
  examples::fill<float>(tensor, [&](int64_t i) { return 10.0f * rank + i; });
  std::vector<c10d::Tensor> gathered = rank == 0 ? makeList(size, -1.0f) : makeList(0);
  pg.gather(gathered, tensor, {.rootRank = 0})->wait();
  bool ok = true;
  for (int r = 0; r < static_cast<int>(gathered.size()); ++r) {
    ok &= checks.expectValues<float>(
        gathered[r], [&](int64_t i) { return 10.0f * r + i; },
        "gather output from rank " + std::to_string(r));
  }
  report("gather", ok, "rank 0 holds [10 r, 10 r + 1, ...] from each rank r");

  // reduce SUM: only the root's result is defined, so only the root checks.
  tensor = make();
  examples::fill<float>(tensor, [&](int64_t i) { return (rank + 1.0f) * (i + 1); });
  pg.reduce(tensor, {.reduceOp = c10d::ReduceOp::SUM, .rootRank = 0})->wait();
  ok = rank != 0 || checks.expectValues<float>(
                        tensor, [&](int64_t i) { return size * (size + 1) / 2.0f * (i + 1); },
                        "reduce SUM at root 0");
  report("reduce SUM", ok, "rank 0 holds sum over r of (r + 1) (i + 1)");

  tensor = make();
  examples::fill<float>(tensor, [&](int64_t i) { return maxInput(rank, i); });
  pg.reduce(tensor, {.reduceOp = c10d::ReduceOp::MAX, .rootRank = 0})->wait();
  ok = rank != 0 || checks.expectValues<float>(
                        tensor,
                        [&](int64_t i) {
                          float best = maxInput(0, i);
                          for (int r = 1; r < size; ++r) best = std::max(best, maxInput(r, i));
                          return best;
                        },
                        "reduce MAX at root 0");
  report("reduce MAX", ok, "rank 0 holds the element-wise max over ranks");

  // allgather: like gather, but everyone ends up with every rank's tensor.
  tensor = make();
  examples::fill<float>(tensor, [&](int64_t i) { return rank * 1.0f * kCount + i; });
  gathered = makeList(size, -1.0f);
  pg.allgather(gathered, tensor)->wait();
  ok = true;
  for (int r = 0; r < size; ++r) {
    ok &= checks.expectValues<float>(
        gathered[r], [&](int64_t i) { return r * 1.0f * kCount + i; },
        "allgather output from rank " + std::to_string(r));
  }
  report("allgather", ok, "every rank holds [r k, r k + 1, ...] from each rank r");

  // reduce_scatter: inputs[r] is this rank's contribution to rank r's result.
  std::vector<c10d::Tensor> inputs = makeList(size);
  for (int r = 0; r < size; ++r) {
    examples::fill<float>(inputs[r], [&](int64_t i) { return rank + 10.0f * r + i; });
  }
  tensor = make(-1.0f);
  pg.reduceScatter(tensor, inputs, {.reduceOp = c10d::ReduceOp::SUM})->wait();
  report("reduce_scatter",
         checks.expectValues<float>(
             tensor,
             [&](int64_t i) {
               float sum = 0;
               for (int src = 0; src < size; ++src) sum += src + 10.0f * rank + i;
               return sum;
             },
             "reduce_scatter SUM"),
         "rank r holds the sum of every rank's chunk r");

  // alltoall: inputs[r] goes to rank r; outputs[r] comes from rank r.
  for (int r = 0; r < size; ++r) {
    examples::fill<float>(inputs[r], [&](int64_t i) { return 100.0f * rank + 10.0f * r + i; });
  }
  std::vector<c10d::Tensor> outputs = makeList(size, -1.0f);
  pg.alltoall(outputs, inputs)->wait();
  ok = true;
  for (int r = 0; r < size; ++r) {
    ok &= checks.expectValues<float>(
        outputs[r], [&](int64_t i) { return 100.0f * r + 10.0f * rank + i; },
        "alltoall output from rank " + std::to_string(r));
  }
  report("alltoall", ok, "outputs[r] on rank q is rank r's inputs[q]");

  std::printf("rank %d of %d: %d of %d collectives checked ok\n", rank, size, passed, done);
}

}  // namespace

int main() {
  return examples::runExample("collectives_tour", run);
}
