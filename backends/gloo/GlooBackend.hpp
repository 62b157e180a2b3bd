#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "backends/common/QueuedBackend.hpp"

namespace c10d::inline v0 {

// The Gloo backend: CPU tensors, every dtype and reduce op, over one Gloo TCP context per group
// that is built once at construction and reused by every operation.
//
// Collectives run in issue order on a worker thread, or on the caller's thread when it waits
// for an operation that is next in line (so blocking calls cost no hand-off). Point-to-point
// operations go straight to Gloo's unbound buffers with the tag as slot; their Work completes
// when waited on or, at the latest, by a progress thread.
//
// Gloo closes a context for good after any transport error or timeout: the first such failure
// fails that operation (TimeoutError or BackendError naming op, group, rank and sequence number)
// and every later one with BackendError quoting it. Create a new group to continue.
//
struct WireCall;  // private to backends/gloo

// The address other ranks reach this one on: C10D_SOCKET_IFNAME or GLOO_SOCKET_IFNAME names an
// interface; otherwise the local address that routes to the store's host (127.0.0.1 for
// single-host stores).
class GlooBackend : public QueuedBackend {
 public:
  explicit GlooBackend(const BackendContext& context);
  ~GlooBackend() override;

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

  // The Gloo context, for code in this folder (each collective's file). Opaque elsewhere.
  struct Runtime;
  Runtime& runtime() { return *runtime_; }

 private:
  // Queues a collective: fn runs with the op's sequence number as its Gloo tag. call is what
  // this rank's messages say it is doing (the always-on check, WireCall.hpp); details
  // describes the op's arguments, and runs only when a description is needed.
  std::shared_ptr<Work> enqueue(const WireCall& call, std::function<std::string()> details,
                                std::chrono::milliseconds timeout, std::vector<Tensor> outputs,
                                std::function<void(uint32_t tag)> fn);
  std::shared_ptr<Work> startP2P(bool isSend, const Tensor& tensor, int peer, int tag,
                                 std::chrono::milliseconds timeout) override;
  void stopAfterQueue() override;

  std::shared_ptr<Runtime> runtime_;
};

}  // namespace c10d::inline v0
