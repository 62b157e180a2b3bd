// A framework's process: libtorch loaded first (its own c10d:: included), c10d from the
// installed package beside it. Each rank all-reduces a torch tensor handed over through DLPack,
// in place, and checks a typed c10d error still reaches its catch. Run with the installed
// c10drun --nproc-per-node 2.
#include <c10d/Init.hpp>
#include <c10d/ProcessGroup.hpp>
#include <c10d/core/Tensor.hpp>

#include <cstdio>

#include "torch_side.hpp"

namespace {

int fail(int rank, const char* what) {
  std::fprintf(stderr, "rank %d: %s\n", rank, what);
  return 1;
}

}  // namespace

int main() {
  if (!torch_side::torchStoreWorks()) return fail(-1, "libtorch's own c10d::HashStore failed");

  std::shared_ptr<c10d::ProcessGroup> group = c10d::initProcessGroup();
  const int rank = group->rank();
  const int size = group->size();
  constexpr int64_t kCount = 1000;

  torch_side::Tensor torchTensor(kCount, static_cast<float>(rank + 1));
  c10d::Tensor shared = c10d::fromDLPack(torchTensor.toDLPack());
  if (shared.data() != torchTensor.data()) return fail(rank, "fromDLPack copied the torch tensor");
  group->allreduce(shared)->wait();
  const float expected = size * (size + 1) / 2.0f;
  for (int64_t i = 0; i < kCount; ++i) {
    if (torchTensor.at(i) != expected)
      return fail(rank, "allreduce result is wrong in the torch tensor");
  }

  bool caught = false;
  try {
    group->broadcast(shared, {.rootRank = size});
  } catch (const c10d::InvalidArgument&) {
    caught = true;
  }
  if (!caught) return fail(rank, "an out-of-range root did not throw c10d::InvalidArgument");

  group->barrier()->wait();
  group->shutdown();
  std::printf("rank %d: torch tensor all-reduced through DLPack beside libtorch (sum %g)\n", rank,
              expected);
  return 0;
}
