#pragma once

// The NCCL backend ("nccl"): collectives and point-to-point on CUDA tensors. No CUDA or NCCL
// header is included here; the implementation is private (backends/nccl/*.cpp).

#include <chrono>
#include <memory>
#include <vector>

#include "c10d/Backend.hpp"
#include "c10d/core/Cuda.hpp"  // currentCudaStream(): each op's stream waits on it

namespace c10d::inline v0 {

// One NCCL communicator per group, created at the group's first op on the device of its tensors
// from a unique id that rank 0 publishes in the group's store (so a group that never touches a
// GPU never needs one). Each op is enqueued on the group's own stream after the caller's current
// stream, and completes when its CUDA event does: Work::wait makes the caller's stream wait on
// it and returns, or, with C10D_NCCL_BLOCKING_WAIT=1, waits on the host (and rethrows errors
// and timeouts). A watchdog thread completes Works, polls ncclCommGetAsyncError and the ops'
// timeouts, and on either aborts the communicator and fails the pending Works with a message
// naming group, op and sequence number; the group is unusable afterwards.
//
// Subgroups split the parent's communicator with ncclCommSplit when it exists (every rank of
// the parent takes part, as newGroup/split require). Point-to-point tags are not part of NCCL:
// messages between two ranks match in issue order. recv_anysource is not supported; neither are
// reductions with BAND/BOR/BXOR or on int16 tensors, which NCCL lacks (BackendError naming them,
// before any device work). Ops that only move data move every dtype, as bytes.
class NcclBackend : public Backend {
 public:
  explicit NcclBackend(const BackendContext& context);
  ~NcclBackend() override;

  std::shared_ptr<Work> broadcast(const Tensor& tensor, const BroadcastOptions& options) override;
  std::shared_ptr<Work> allreduce(const Tensor& tensor, const AllreduceOptions& options) override;
  std::shared_ptr<Work> allreduceCoalesced(const std::vector<Tensor>& tensors,
                                           const AllreduceOptions& options) override;
  std::shared_ptr<Work> reduce(const Tensor& tensor, const ReduceOptions& options) override;
  std::shared_ptr<Work> allgather(const std::vector<Tensor>& outputs, const Tensor& input,
                                  const AllgatherOptions& options) override;
  std::shared_ptr<Work> allgatherIntoTensor(const Tensor& output, const Tensor& input,
                                            const AllgatherOptions& options) override;
  std::shared_ptr<Work> gather(const std::vector<Tensor>& outputs, const Tensor& input,
                               const GatherOptions& options) override;
  std::shared_ptr<Work> scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                const ScatterOptions& options) override;
  std::shared_ptr<Work> reduceScatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                      const ReduceScatterOptions& options) override;
  std::shared_ptr<Work> reduceScatterTensor(const Tensor& output, const Tensor& input,
                                            const ReduceScatterOptions& options) override;
  std::shared_ptr<Work> alltoall(const std::vector<Tensor>& outputs,
                                 const std::vector<Tensor>& inputs,
                                 const AllToAllOptions& options) override;
  std::shared_ptr<Work> alltoallBase(const Tensor& output, const Tensor& input,
                                     const std::vector<int64_t>& outputSplitSizes,
                                     const std::vector<int64_t>& inputSplitSizes,
                                     const AllToAllOptions& options) override;
  std::shared_ptr<Work> barrier(const BarrierOptions& options) override;
  std::shared_ptr<Work> send(const Tensor& tensor, int dstRank, int tag,
                             std::chrono::milliseconds timeout) override;
  std::shared_ptr<Work> recv(const Tensor& tensor, int srcRank, int tag,
                             std::chrono::milliseconds timeout) override;
  std::vector<std::shared_ptr<Work>> batchIsendIrecv(const std::vector<P2POp>& ops,
                                                     std::chrono::milliseconds timeout) override;
  bool handlesDevice(DeviceType type) const override { return type == DeviceType::CUDA; }
  void shutdown() override;
  void abort(const std::string& reason) override;
  std::shared_ptr<void> splitForSubgroup(const std::vector<int>& ranksInParent) override;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace c10d::inline v0
