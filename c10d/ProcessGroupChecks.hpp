#pragma once

// Private to the files of ProcessGroup (c10d/ProcessGroup*.cpp, c10d/Subgroups.cpp,
// c10d/MonitoredBarrier.cpp): the checks an operation runs on its arguments before a backend sees
// them, so bad input is an InvalidArgument on the caller, never a hang on the wire, and how their
// messages list ranks. The checks that need the group itself (checkUsable, checkRank, resolve,
// route) are ProcessGroup's private members, defined in c10d/ProcessGroupChecks.cpp with these.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1::detail {

// "[0, 2, 3]": ranks as messages list them.
std::string rankList(const std::vector<int>& ranks);

// Checks common to every tensor an op touches.
void checkTensor(const Tensor& tensor, const char* op, const char* role);
// actual has expected's dtype and device.
void checkSameKind(const Tensor& expected, const Tensor& actual, const char* op,
                   const std::string& role);
// actual has expected's dtype, device and number of elements.
void checkSameShape(const Tensor& expected, const Tensor& actual, const char* op,
                    const std::string& role);
// tensors holds expected tensors (one per rank).
void checkList(const std::vector<Tensor>& tensors, size_t expected, const char* op,
               const char* role);
// gather's outputs and scatter's inputs: on the root (rank == root), one tensor per rank of a
// group of size, each shaped like like; on every other rank, none.
void checkRootList(const std::vector<Tensor>& tensors, const Tensor& like, int rank, int root,
                   int size, const char* op, const char* role);
// alltoall_base's split sizes on rank of a group of size: each list empty (its tensor's dim 0
// divisible by size) or size counts, none negative, summing to its tensor's dim 0; and the rows
// rank sends itself are the rows it expects from itself.
void checkAlltoallSplits(const Tensor& output, const Tensor& input,
                         const std::vector<int64_t>& outputSplitSizes,
                         const std::vector<int64_t>& inputSplitSizes, int rank, int size);

}  // namespace c10d::inline v1::detail
