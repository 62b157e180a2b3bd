#pragma once

/// \file
/// The NCCL backend ("nccl"): collectives and point-to-point on CUDA tensors. No CUDA or NCCL
/// header is included here; the implementation is private (backends/nccl/*.cpp).

#include <chrono>
#include <memory>
#include <vector>

#include "c10d/Backend.hpp"
#include "c10d/core/Cuda.hpp"  // currentCudaStream(): each op's stream waits on it

namespace c10d::inline v1 {

/// One NCCL communicator per group, created at the group's first op on the device of its tensors
/// from a unique id that rank 0 publishes in the group's store (so a group that never touches a
/// GPU never needs one). Each op is enqueued on the group's own stream after the caller's current
/// stream, and completes when its CUDA event does: Work::wait makes the caller's stream wait on
/// it and returns, or, with C10D_NCCL_BLOCKING_WAIT=1, waits on the host (and rethrows errors
/// and timeouts). A watchdog thread completes Works, polls ncclCommGetAsyncError and the ops'
/// timeouts, and on either aborts the communicator and fails the pending Works with a message
/// naming group, op and sequence number; the group is unusable afterwards.
///
/// Subgroups split the parent's communicator with ncclCommSplit when it exists (every rank of
/// the parent takes part, as newGroup/split require). Point-to-point tags are not part of NCCL:
/// messages between two ranks match in issue order. recv_anysource is not supported; neither are
/// reductions with BAND/BOR/BXOR or on int16 tensors, which NCCL lacks (BackendError naming them,
/// before any device work). Ops that only move data move every dtype, as bytes.
class NcclBackend : public Backend {
 public:
  /// A backend for one group; made by the backend registry when a group selects "nccl". The
  /// communicator is made at the group's first op, or now from the parent's for a subgroup.
  /// \param context The group's rank, size, store, timeout, settings and, for a subgroup, what
  ///   the parent's splitForSubgroup returned.
  explicit NcclBackend(const BackendContext& context);
  ~NcclBackend() override;

  std::shared_ptr<Work> start(const Op& op, const OpTensors& tensors) override;
  std::vector<std::shared_ptr<Work>> startBatch(const std::vector<Op>& ops,
                                                const std::vector<P2POp>& p2p) override;
  bool handlesDevice(DeviceType type) const override { return type == DeviceType::CUDA; }
  void shutdown() override;
  void abort(const std::string& reason) override;
  std::shared_ptr<void> splitForSubgroup(const std::vector<int>& ranksInParent) override;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace c10d::inline v1
