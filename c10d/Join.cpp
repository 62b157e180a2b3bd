#include "c10d/Join.hpp"

#include "c10d/Exception.hpp"

namespace c10d {

Join::Join(ProcessGroup& group) : group_(group) {}

int Join::exchange(bool activeHere) {
  Tensor flags = Tensor::zeros({group_.size()}, ScalarType::Int64);
  flags.data<int64_t>()[group_.rank()] = activeHere ? 1 : 0;
  group_.allreduce(flags, {.reduceOp = ReduceOp::SUM})->wait();
  const int64_t* f = flags.data<int64_t>();
  int active = 0;
  int highest = -1;
  for (int r = 0; r < group_.size(); ++r) {
    if (f[r] != 0) {
      ++active;
      highest = r;
    }
  }
  if (active > 0) lastActiveRank_ = highest;
  active_ = active;
  return active;
}

int Join::step() {
  C10D_CHECK(!finished_, InvalidArgument, "Join on rank ", group_.rank(),
             ": step() after finish(); a rank that has joined has no more data");
  return exchange(true);
}

int Join::finish(const std::function<void()>& shadowStep) {
  C10D_CHECK(!finished_, InvalidArgument, "Join on rank ", group_.rank(),
             ": finish() called twice");
  finished_ = true;
  while (exchange(false) > 0) {
    if (shadowStep) shadowStep();
  }
  return lastActiveRank_;
}

}  // namespace c10d
