#pragma once

// Private to the files of ProcessGroup (c10d/ProcessGroup*.cpp, c10d/Subgroups.cpp,
// c10d/MonitoredBarrier.cpp): withErrorContext, the member template that puts the op, this group,
// this rank and the peer into an Error that leaves a public operation. The rest of the path from
// a public operation to its backend (issue: numbering, recording, the DETAIL check, traffic) is
// in c10d/ProcessGroupInstrumentation.cpp.

#include <atomic>

#include "c10d/GroupState.hpp"
#include "c10d/GroupTrace.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

namespace detail {
struct CoalescingBlock;
// Coalescing blocks open in the process (ProcessGroup::startCoalescing): what issue looks at
// first, so that an op pays one relaxed load, not a thread-local look-up, while none is open.
extern std::atomic<int> openCoalescingBlocks;
// The coalescing block this thread began, else null.
extern thread_local CoalescingBlock* tlsCoalescingBlock;
}  // namespace detail

template <typename Body>
auto ProcessGroup::withErrorContext(const char* op, int peer, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (Error& e) {
    ErrorContext context{.op = op, .group = state_->trace->group(), .rank = state_->trace->rank()};
    if (peer >= 0) context.peers = {peer};
    e.addContext(context);
    throw;
  }
}

}  // namespace c10d::inline v1
