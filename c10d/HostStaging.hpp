#pragma once

// Serves device (CUDA) tensors with a backend that moves only CPU tensors, such as Gloo or a
// non-CUDA-aware MPI, as PyTorch's Gloo backend does: each op copies its inputs to host memory
// on the caller's thread (after the work queued on the caller's current stream), runs the inner
// backend's op on the host copies, and copies the outputs back to the device before its Work
// completes. Work::wait therefore returns with the results on the device.
//
// Costs one device-to-host copy per input and one host-to-device copy per output, with the
// caller blocked for the first; the inner backend's own thread makes the second.

#include <functional>
#include <memory>

#include "c10d/Backend.hpp"

namespace c10d::inline v0 {

class HostStagingBackend : public Backend {
 public:
  // Copies between a device tensor and a host tensor of the same dtype and size, in either
  // direction (copyTensor(dst, src) by default; tests substitute a plain memcpy).
  using Copy = std::function<void(const Tensor& dst, const Tensor& src)>;

  explicit HostStagingBackend(std::shared_ptr<Backend> inner, Copy copy = nullptr);

  const std::shared_ptr<Backend>& inner() const { return inner_; }

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
  std::shared_ptr<Work> recvAnysource(const Tensor& tensor, int tag,
                                      std::chrono::milliseconds timeout) override;
  std::vector<std::shared_ptr<Work>> batchIsendIrecv(const std::vector<P2POp>& ops,
                                                     std::chrono::milliseconds timeout) override;
  bool handlesDevice(DeviceType) const override { return true; }
  // The inner backend belongs to the ProcessGroup, which shuts it down.

 private:
  class Staging;

  std::shared_ptr<Backend> inner_;
  Copy copy_;
};

}  // namespace c10d::inline v0
