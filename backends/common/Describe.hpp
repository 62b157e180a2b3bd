#pragma once

// How every backend names its operations in errors and logs, built lazily (Work::Describe):
// formatting per op cost more than a small collective's own work.

#include <cstdint>
#include <functional>
#include <string>

#include "c10d/Work.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v0 {

// "allreduce float32[4] cpu sum (group 'default', seq 12)"; details may be empty.
inline Work::Describe describeCollective(const char* op, std::function<std::string()> details,
                                         std::string group, uint64_t sequence) {
  return [op, details = std::move(details), group = std::move(group), sequence] {
    std::string arguments = details ? details() : std::string();
    return detail::concat(op, arguments.empty() ? "" : " ", arguments, " (group '", group,
                          "', seq ", sequence, ")");
  };
}

// "send float32[4] cpu to rank 1 tag 0 (group 'default')"; peer < 0 is any source.
inline Work::Describe describePointToPoint(const char* op, const Tensor& tensor, bool isSend,
                                           int peer, int tag, std::string group) {
  return [op, tensor, isSend, peer, tag, group = std::move(group)] {
    return peer < 0
               ? detail::concat(op, " ", tensor.describe(), " tag ", tag, " (group '", group, "')")
               : detail::concat(op, " ", tensor.describe(), isSend ? " to rank " : " from rank ",
                                peer, " tag ", tag, " (group '", group, "')");
  };
}

}  // namespace c10d::inline v0
