// ProcessGroup::startCoalescing / endCoalescing (torch's _coalescing_manager): allreduces held
// while a thread's block is open, then issued as one allreduceCoalesced.

#include <memory>
#include <vector>

#include "c10d/ProcessGroupInstrumentation.hpp"

namespace c10d::inline v1 {
namespace detail {

// A held op's Work: fails a wait before the block ended, then completes with the fused op.
class HeldWork : public Work, public std::enable_shared_from_this<HeldWork> {
 public:
  HeldWork(std::string description, std::chrono::milliseconds timeout, Tensor tensor)
      : Work(std::move(description), timeout, {std::move(tensor)}) {}

  void wait(std::chrono::milliseconds timeout) override {
    if (!issued_.load(std::memory_order_acquire)) {
      C10D_THROW(StateError, description(),
                 " is held in a coalescing block: it starts at endCoalescing(); wait after it");
    }
    Work::wait(timeout);
  }
  // Completes this Work as fused completes.
  void follow(const std::shared_ptr<Work>& fused) {
    issued_.store(true, std::memory_order_release);
    fused->getFuture()->addCallback([self = weak_from_this()](Future& future) {
      auto held = self.lock();
      if (held == nullptr) return;
      if (auto error = future.error()) {
        held->finishWithError(copyError(error));
      } else {
        held->finish();
      }
    });
  }

 private:
  std::atomic<bool> issued_{false};
};

struct CoalescingBlock {
  const ProcessGroup* group;
  Op first;  // the first held op, which the others must match
  std::vector<Tensor> tensors;
  AllreduceOptions options;
  std::vector<std::shared_ptr<HeldWork>> works;
};

std::atomic<int> openCoalescingBlocks{0};
thread_local CoalescingBlock* tlsCoalescingBlock = nullptr;

}  // namespace detail

void ProcessGroup::startCoalescing() {
  withErrorContext("start_coalescing", -1, [&] {
    checkUsable("start_coalescing");
    if (auto* open = detail::tlsCoalescingBlock) {
      C10D_THROW(InvalidArgument, "startCoalescing on group '", state_->options.groupName,
                 "': this thread's coalescing block ",
                 open->group == this ? "of this group" : "of another group",
                 " is still open; end it first (blocks do not nest)");
    }
    detail::tlsCoalescingBlock = new detail::CoalescingBlock{this, {}, {}, {}, {}};
    detail::openCoalescingBlocks.fetch_add(1, std::memory_order_relaxed);
  });
}

std::shared_ptr<Work> ProcessGroup::hold(const Op& op, const OpTensors& tensors) {
  detail::CoalescingBlock& block = *detail::tlsCoalescingBlock;
  const std::string what = describe(op);
  C10D_CHECK(block.group == this, InvalidArgument, what, " on group '", state_->options.groupName,
             "' inside a coalescing block of another group: a block holds one group's ops; "
             "end it first");
  C10D_CHECK(op.type == OpType::Allreduce, InvalidArgument, what,
             " cannot be coalesced: a coalescing block holds allreduces only");
  if (!block.tensors.empty()) {
    const Op& first = block.first;
    C10D_CHECK(
        op.reduceOp == first.reduceOp && op.dtype == first.dtype && op.device == first.device,
        InvalidArgument, what, " differs from the coalescing block's first allreduce (",
        describe(first), "): one block reduces one dtype and device with one reduce op");
  } else {
    block.first = op;
    block.options.reduceOp = op.reduceOp;
    block.options.timeout = op.timeout;
  }
  block.tensors.push_back(*tensors.input);
  auto work = std::make_shared<detail::HeldWork>(
      detail::concat(what, " (coalesced, group '", state_->options.groupName, "')"), op.timeout,
      *tensors.input);
  block.works.push_back(work);
  return work;
}

bool ProcessGroup::isCoalescing() const {
  return detail::tlsCoalescingBlock != nullptr && detail::tlsCoalescingBlock->group == this;
}

std::shared_ptr<Work> ProcessGroup::endCoalescing() {
  return withErrorContext("end_coalescing", -1, [&]() -> std::shared_ptr<Work> {
    detail::CoalescingBlock* open = detail::tlsCoalescingBlock;
    C10D_CHECK(open != nullptr && open->group == this, InvalidArgument, "endCoalescing on group '",
               state_->options.groupName, "': ",
               open == nullptr ? "no coalescing block is open on this thread"
                               : "this thread's open block is of another group");
    std::unique_ptr<detail::CoalescingBlock> block(open);
    detail::tlsCoalescingBlock = nullptr;
    detail::openCoalescingBlocks.fetch_sub(1, std::memory_order_relaxed);
    if (block->tensors.empty()) {
      auto empty =
          std::make_shared<BackendWork>("an empty coalescing block", state_->options.timeout);
      empty->finish();
      return empty;
    }
    std::shared_ptr<Work> fused = allreduceCoalesced(block->tensors, block->options);
    for (const auto& held : block->works) held->follow(fused);
    return fused;
  });
}

}  // namespace c10d::inline v1
