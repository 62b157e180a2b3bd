// ProcessGroup's argument validation: the checks on tensors, tensor lists, ranks, timeouts and
// split sizes that every operation runs before its backend sees it, and the routing of an op to
// the backend for its tensors' device (which refuses a shut-down group or a non-member first).

#include "c10d/ProcessGroupChecks.hpp"

#include <sstream>

#include "c10d/GroupState.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

namespace detail {

std::string rankList(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
  out << "]";
  return out.str();
}

// Checks common to every tensor an op touches.
void checkTensor(const Tensor& tensor, const char* op, const char* role) {
  C10D_CHECK(tensor.defined(), InvalidArgument, op, ": ", role, " tensor is undefined");
  C10D_CHECK(tensor.isContiguous(), InvalidArgument, op, ": ", role, " tensor ", tensor.describe(),
             " is not contiguous; pass a contiguous copy");
  if (tensor.device().isCPU()) return;
  // Asked once: CUDA fixes the devices a process sees when it starts.
  static const int gpus = cudaDeviceCount();
  C10D_CHECK(gpus > 0, InvalidArgument, op, ": ", role, " tensor ", tensor.describe(),
             " is on a GPU but this process has no usable GPU (no CUDA device or driver, "
             "CUDA_VISIBLE_DEVICES hides them, or c10d was built without CUDA)");
  C10D_CHECK(tensor.device().index < gpus, InvalidArgument, op, ": ", role, " tensor ",
             tensor.describe(), " is on ", tensor.device(), " but this process sees ", gpus,
             " GPU(s)");
}

void checkSameKind(const Tensor& expected, const Tensor& actual, const char* op,
                   const std::string& role) {
  C10D_CHECK(actual.dtype() == expected.dtype() && actual.device() == expected.device(),
             InvalidArgument, op, ": ", role, " is ", actual.describe(), " but expected ",
             expected.dtype(), " on ", expected.device());
}

void checkSameShape(const Tensor& expected, const Tensor& actual, const char* op,
                    const std::string& role) {
  checkSameKind(expected, actual, op, role);
  C10D_CHECK(actual.numel() == expected.numel(), InvalidArgument, op, ": ", role, " is ",
             actual.describe(), " but must have ", expected.numel(), " elements like ",
             expected.describe());
}

void checkList(const std::vector<Tensor>& tensors, size_t expected, const char* op,
               const char* role) {
  C10D_CHECK(tensors.size() == expected, InvalidArgument, op, ": expected ", expected, " ", role,
             " tensors (one per rank), got ", tensors.size());
}

void checkRootList(const std::vector<Tensor>& tensors, const Tensor& like, int rank, int root,
                   int size, const char* op, const char* role) {
  if (rank != root) {
    C10D_CHECK(tensors.empty(), InvalidArgument, op, ": rank ", rank, " is not the root (", root,
               ") and must pass no ", role, "s");
    return;
  }
  checkList(tensors, size, op, role);
  for (int r = 0; r < size; ++r) {
    checkTensor(tensors[r], op, role);
    checkSameShape(like, tensors[r], op, std::string(role) + " " + std::to_string(r));
  }
}

void checkAlltoallSplits(const Tensor& output, const Tensor& input,
                         const std::vector<int64_t>& outputSplitSizes,
                         const std::vector<int64_t>& inputSplitSizes, int rank, int size) {
  auto rowsOf = [](const Tensor& tensor) { return tensor.dim() == 0 ? 1 : tensor.sizes()[0]; };
  auto checkSplits = [&](const std::vector<int64_t>& splits, const Tensor& tensor,
                         const char* role) {
    int64_t rows = rowsOf(tensor);
    if (splits.empty()) {
      C10D_CHECK(rows % size == 0, InvalidArgument, "alltoall_base: ", role, " ", tensor.describe(),
                 " has ", rows, " rows, not divisible by the group size ", size,
                 "; pass split sizes");
      return;
    }
    C10D_CHECK(static_cast<int>(splits.size()) == size, InvalidArgument,
               "alltoall_base: ", splits.size(), " ", role, " split sizes for a group of ", size);
    int64_t total = 0;
    for (int64_t split : splits) {
      C10D_CHECK(split >= 0, InvalidArgument, "alltoall_base: negative ", role, " split ", split);
      total += split;
    }
    C10D_CHECK(total == rows, InvalidArgument, "alltoall_base: ", role, " splits sum to ", total,
               " but ", role, " ", tensor.describe(), " has ", rows, " rows");
  };
  checkSplits(inputSplitSizes, input, "input");
  checkSplits(outputSplitSizes, output, "output");
  // What this rank sends itself must be what it expects from itself: no peer can make up for it.
  auto ownRows = [&](const std::vector<int64_t>& splits, const Tensor& tensor) {
    return splits.empty() ? rowsOf(tensor) / size : splits[rank];
  };
  auto rowBytes = [&](const Tensor& tensor) {
    return rowsOf(tensor) == 0 ? int64_t{0}
                               : static_cast<int64_t>(tensor.nbytes()) / rowsOf(tensor);
  };
  const int64_t sentToSelf = ownRows(inputSplitSizes, input);
  const int64_t expectedFromSelf = ownRows(outputSplitSizes, output);
  C10D_CHECK(
      sentToSelf == expectedFromSelf && (sentToSelf == 0 || rowBytes(input) == rowBytes(output)),
      InvalidArgument, "alltoall_base: rank ", rank, " sends itself ", sentToSelf,
      " rows but expects ", expectedFromSelf, " from itself (input ", input.describe(), ", output ",
      output.describe(), "); its input split ", rank, " and output split ", rank,
      " must describe the same rows");
}

}  // namespace detail

void ProcessGroup::checkUsable(const char* op) const {
  C10D_CHECK(state_->member, InvalidArgument, op, ": this process is not a member of group '",
             state_->options.groupName, "'");
  C10D_CHECK(!state_->shutdown.load(), StateError, op, ": process group '",
             state_->options.groupName, "' was shut down",
             state_->retiredBecause.empty() ? "" : ": ", state_->retiredBecause);
}

void ProcessGroup::checkRank(int rank, const char* what, const char* op) const {
  C10D_CHECK(rank >= 0 && rank < state_->size, InvalidArgument, op, ": ", what, " ", rank,
             " out of range [0, ", state_->size, ") of group '", state_->options.groupName, "'");
}

std::chrono::milliseconds ProcessGroup::resolveGiven(std::chrono::milliseconds timeout,
                                                     const char* op) const {
  C10D_CHECK(timeout.count() > 0, InvalidArgument, op, " in group '", state_->options.groupName,
             "': timeout must be positive, got ", timeout.count(),
             " ms (leave it unset for the group's timeout)");
  return timeout;
}

Backend& ProcessGroup::route(const Tensor& tensor, const char* op) const {
  const detail::GroupState& s = *state_;
  const auto device = static_cast<size_t>(tensor.device().type);
  Backend* routed = device < s.routed.size() ? s.routed[device] : nullptr;
  // Every op passes here: the common case (a usable group, a contiguous host tensor) in one test.
  if (routed != nullptr && s.member && !s.shutdown.load(std::memory_order_acquire) &&
      tensor.defined() && tensor.device().isCPU() && tensor.isContiguous()) {
    return *routed;
  }
  checkUsable(op);
  detail::checkTensor(tensor, op, "the");
  if (routed == nullptr) backend(tensor.device().type);  // throws, naming the spec
  return *routed;
}

}  // namespace c10d::inline v1
