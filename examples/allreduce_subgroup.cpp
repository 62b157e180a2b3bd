// Collectives inside a subgroup: every rank calls newGroup({0, 1}), because creating a group is
// itself collective, but only ranks 0 and 1 get a working group and all-reduce in it; the
// others get a handle with isMember() false and stay out. Then the whole world all-reduces, to
// show that the default group is unaffected by the subgroup's traffic. Needs at least 2 ranks.
// Run it with `c10drun --nproc-per-node 4 allreduce_subgroup`.
//
// Exits 0 only when every check below passed on this rank.

#include <cstdint>
#include <cstdio>
#include <memory>

#include "ExampleUtils.hpp"

namespace {

constexpr int64_t kCount = 16;

// What global rank `rank` contributes to element i of each all-reduce.
float contribution(int rank, int64_t i) {
  return static_cast<float>((rank + 1) * (i + 1));
}

void run(c10d::ProcessGroup& world, examples::Checker& checks) {
  C10D_CHECK(world.size() >= 2, c10d::InvalidArgument, "needs at least 2 ranks, got ", world.size(),
             "; run with c10drun --nproc-per-node 2 (or more)");
  const int rank = world.rank();
  std::shared_ptr<c10d::ProcessGroup> pair = world.newGroup({0, 1});

  if (pair->isMember()) {
    checks.expect(
        pair->size() == 2 && pair->rank() == rank && pair->globalRank(pair->rank()) == rank,
        "subgroup reports rank ", pair->rank(), " of ", pair->size(), ", expected rank ", rank,
        " of 2");
    c10d::Tensor tensor = examples::empty({kCount}, c10d::ScalarType::Float32);
    examples::fill<float>(tensor, [&](int64_t i) { return contribution(rank, i); });
    pair->allreduce(tensor, {.reduceOp = c10d::ReduceOp::SUM})->wait();
    bool ok = checks.expectValues<float>(
        tensor, [](int64_t i) { return contribution(0, i) + contribution(1, i); },
        "subgroup {0, 1} allreduce SUM");
    std::printf("rank %d: subgroup {0, 1} allreduce SUM of %lld floats %s\n", rank,
                static_cast<long long>(kCount), ok ? "matches ranks 0 + 1" : "WRONG");
  } else {
    // A non-member handle refuses every operation rather than hanging the members.
    bool refused = false;
    try {
      c10d::Tensor probe = examples::zeros<float>({1}, c10d::ScalarType::Float32);
      pair->allreduce(probe);
    } catch (const c10d::InvalidArgument&) {
      refused = true;
    }
    checks.expect(refused, "allreduce on a non-member handle did not throw InvalidArgument");
    std::printf("rank %d: not in subgroup {0, 1}, stayed out (its handle refuses operations)\n",
                rank);
  }

  c10d::Tensor tensor = examples::empty({kCount}, c10d::ScalarType::Float32);
  examples::fill<float>(tensor, [&](int64_t i) { return contribution(rank, i); });
  world.allreduce(tensor)->wait();
  bool ok = checks.expectValues<float>(
      tensor,
      [&](int64_t i) {
        float sum = 0;
        for (int r = 0; r < world.size(); ++r) sum += contribution(r, i);
        return sum;
      },
      "world allreduce SUM");
  std::printf("rank %d: world allreduce SUM over %d ranks %s\n", rank, world.size(),
              ok ? "matches" : "WRONG");
}

}  // namespace

int main() {
  return examples::runExample("allreduce_subgroup", run);
}
