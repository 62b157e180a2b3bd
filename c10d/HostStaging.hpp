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

namespace c10d::inline v1 {

class HostStagingBackend : public Backend {
 public:
  // Copies between a device tensor and a host tensor of the same dtype and size, in either
  // direction (copyTensor(dst, src) by default; tests substitute a plain memcpy).
  using Copy = std::function<void(const Tensor& dst, const Tensor& src)>;

  explicit HostStagingBackend(std::shared_ptr<Backend> inner, Copy copy = nullptr);

  const std::shared_ptr<Backend>& inner() const { return inner_; }

  std::shared_ptr<Work> start(const Op& op, const OpTensors& tensors) override;
  std::vector<std::shared_ptr<Work>> startBatch(const std::vector<Op>& ops,
                                                const std::vector<P2POp>& p2p) override;
  bool handlesDevice(DeviceType) const override { return true; }
  // The inner backend belongs to the ProcessGroup, which shuts it down.

 private:
  class Staging;

  std::shared_ptr<Backend> inner_;
  Copy copy_;
};

}  // namespace c10d::inline v1
