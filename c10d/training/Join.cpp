#include "c10d/training/Join.hpp"

#include <algorithm>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

Join::Join(ProcessGroup& group)
    : group_(group), flags_(Tensor::empty({group.size()}, ScalarType::Int64)) {}

int Join::exchange(bool activeHere) {
  int64_t* f = flags_.data<int64_t>();
  std::fill(f, f + group_.size(), 0);
  f[group_.rank()] = activeHere ? 1 : 0;
  group_.allreduce(flags_, {.reduceOp = ReduceOp::SUM})->wait();
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

}  // namespace c10d::inline v1
