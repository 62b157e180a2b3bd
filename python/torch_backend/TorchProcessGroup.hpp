#pragma once

// The torch half of the backend (Bridge.hpp): a torch c10d::ProcessGroup whose every operation
// is one of our ProcessGroup's. Sees torch's headers, never ours.

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>

#include "python/torch_backend/Bridge.hpp"

namespace torch_backend {

// The name torch knows the backend by: torch.distributed.init_process_group(backend="c10d").
inline constexpr const char* kBackendName = "c10d";

// torch's Work over one of our operations. Its Future completes with the op's output tensors
// (or its error) on the thread that ends the op, which is what DDP's comm hooks chain on.
class TorchWork final : public ::c10d::Work {
 public:
  // profilingTitle: null, or the profiler's label for the op ("c10d:all_reduce"); inputs are
  // only read when it is set (the profiler's record_shapes).
  TorchWork(std::shared_ptr<torch_bridge::Op> op, ::c10d::OpType type, const char* profilingTitle,
            const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  // timeout 0 (torch's kNoTimeout): the op's own timeout. Rethrows the op's error.
  bool wait(std::chrono::milliseconds timeout) override;
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::shared_ptr<torch_bridge::Op> op_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Waits, at most limit, for the completions of torch's Futures still running on our threads
// (their callbacks may be Python); false when the limit passed. c10d.torch calls it at exit.
bool drainCompletions(std::chrono::milliseconds limit);

// Threading: as our ProcessGroup (any thread; Gloo orders operations as issued). Lists of
// tensors for torch's per-device variants must hold one tensor (one device per process).
class TorchProcessGroup final : public ::c10d::ProcessGroup {
 public:
  // Rendezvouses through store (blocks until the group's ranks have come, or timeout). name is
  // the group's name in our errors and flight recorder; backendSpec "" reads C10D_BACKEND;
  // profilerName starts the profiler's labels of its ops ("c10d:all_reduce"): the name
  // torch.distributed knows the group's backend by, which differs only for a stand-in.
  TorchProcessGroup(c10::intrusive_ptr<::c10d::Store> store, int rank, int size,
                    std::chrono::milliseconds timeout, std::string name, std::string backendSpec,
                    std::string profilerName = kBackendName);
  ~TorchProcessGroup() override;

  const std::string getBackendName() const override { return kBackendName; }
  // Our backend spec ("gloo", "cpu:gloo,cuda:nccl").
  const std::string& backendSpec() const { return group_->backendSpec(); }

  using Tensors = std::vector<at::Tensor>;
  using TensorLists = std::vector<std::vector<at::Tensor>>;
  c10::intrusive_ptr<::c10d::Work> broadcast(Tensors& tensors,
                                             const ::c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allreduce(Tensors& tensors,
                                             const ::c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allreduce_coalesced(
      Tensors& tensors, const ::c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce(Tensors& tensors,
                                          const ::c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allgather(TensorLists& outputs, Tensors& inputs,
                                             const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allgather_coalesced(
      TensorLists& outputs, Tensors& inputs, const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> gather(TensorLists& outputs, Tensors& inputs,
                                          const ::c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> scatter(Tensors& outputs, TensorLists& inputs,
                                           const ::c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce_scatter(
      Tensors& outputs, TensorLists& inputs, const ::c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& outputSplits,
                                                 std::vector<int64_t>& inputSplits,
                                                 const ::c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall(Tensors& outputs, Tensors& inputs,
                                            const ::c10d::AllToAllOptions& opts) override;
  void monitoredBarrier(const ::c10d::BarrierOptions& opts, bool waitAllRanks) override;
  // Every rank's count starts at 0 with the group, so there is nothing to agree on.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return group_->sequence(); }
  c10::intrusive_ptr<::c10d::Work> send(Tensors& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<::c10d::Work> recv(Tensors& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<::c10d::Work> recvAnysource(Tensors& tensors, int tag) override;
  c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions& opts) override;

 private:
  // The op's Work; its profiler label when the profiler is on.
  c10::intrusive_ptr<::c10d::Work> work(std::shared_ptr<torch_bridge::Op> op, ::c10d::OpType type,
                                        const std::vector<at::Tensor>& inputs,
                                        std::vector<at::Tensor> outputs) const;

  std::unique_ptr<torch_bridge::Group> group_;
  std::string profilerName_;
  // "<profilerName>:all_reduce" by OpType, made once: the profiler labels every op.
  std::array<const char*, static_cast<size_t>(::c10d::OpType::_REDUCE_SCATTER_BASE) + 1>
      profilingTitles_{};
};

}  // namespace torch_backend
