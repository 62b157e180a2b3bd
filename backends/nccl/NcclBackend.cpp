// The NCCL backend: every op is enqueued on the group's stream (after the caller's current
// stream) under one mutex, with a CUDA event after it; a watchdog thread (NcclWatchdog.cpp)
// completes the Works as their events fire and aborts the communicator (NcclCommunicator.cpp) on
// an asynchronous error or a timeout.

#include "backends/nccl/NcclBackend.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/common/Describe.hpp"
#include "backends/nccl/NcclCommunicator.hpp"
#include "backends/nccl/NcclTypes.hpp"
#include "backends/nccl/NcclWatchdog.hpp"
#include "c10d/BackendLibrary.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/CudaRuntime.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v0 {

struct NcclBackend::Impl {
  explicit Impl(const BackendContext& context)
      : communicator(context),
        watchdog(mutex, communicator),
        blockingWait(context.settings.flag("C10D_NCCL_BLOCKING_WAIT").value_or(false)),
        timeout(context.timeout) {}

  std::mutex mutex;  // issue order of ops, the communicator, the watchdog's in-flight Works
  nccl::Communicator communicator;
  nccl::Watchdog watchdog;
  bool blockingWait;
  std::chrono::milliseconds timeout;  // the group's: how long shutdown waits for pending ops
  uint64_t sequence = 0;

  // Enqueues launch(comm, stream) after the caller's current stream and returns its Work.
  template <typename Launch>
  std::shared_ptr<Work> run(const char* op, std::function<std::string()> details, int onDevice,
                            std::chrono::milliseconds opTimeout, std::vector<Tensor> outputs,
                            std::vector<Tensor> inputs, Launch&& launch) {
    std::lock_guard<std::mutex> guard(mutex);
    C10D_CHECK(!watchdog.stopping(), StateError, op, ": ", communicator.where(), " was shut down");
    // The group's first op makes the communicator, and the watchdog's thread with it.
    if (communicator.ensure(onDevice)) watchdog.start();
    uint64_t seq = sequence++;
    Work::Describe describe = describeCollective(op, std::move(details), communicator.group(), seq);
    auto what = [&] { return detail::concat(describe(), " on rank ", communicator.rank()); };
    ncclComm_t comm = communicator.comm();
    cudaStream_t stream = communicator.stream();
    CudaDeviceGuard deviceGuard(communicator.device());
    cudaEvent_t before = nullptr, done = nullptr;
    C10D_CUDA(cudaEventCreateWithFlags(&before, cudaEventDisableTiming), what);
    try {
      C10D_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), what);
      C10D_CUDA(cudaEventRecord(before, static_cast<cudaStream_t>(currentCudaStream())), what);
      C10D_CUDA(cudaStreamWaitEvent(stream, before, 0), what);
      launch(comm, stream, what);
      C10D_CUDA(cudaEventRecord(done, stream), what);
    } catch (...) {
      cudaEventDestroy(before);
      if (done != nullptr) cudaEventDestroy(done);
      throw;
    }
    cudaEventDestroy(before);
    inputs.insert(inputs.end(), outputs.begin(), outputs.end());
    auto work = std::make_shared<NcclWork>(describe, opTimeout, std::move(outputs),
                                           std::move(inputs), done, blockingWait);
    watchdog.track(work);
    return work;
  }

  void shutdown() { stop(std::chrono::steady_clock::now() + timeout, "at shutdown, "); }

  // Pending ops finish first, until deadline: one whose peer died would hold the stream (and a
  // destroy) forever, so past it the communicator is aborted (ncclCommAbort), and the ops still
  // pending fail, naming why: an op the abort ended fires its event without having completed.
  void stop(std::chrono::steady_clock::time_point deadline, const std::string& why) {
    // Ends an op that waits, holding the mutex, for ranks to make the communicator.
    communicator.cancel();
    if (!watchdog.stop()) return;
    nccl::Watchdog::Finished finished;
    {
      std::lock_guard<std::mutex> guard(mutex);
      if (communicator.comm() != nullptr) {
        CudaDeviceGuard deviceGuard(communicator.device());
        std::string stuck = communicator.awaitStream(deadline);
        if (stuck.empty()) {
          watchdog.drainLocked(finished);
        } else {
          watchdog.abortPendingLocked(why + stuck, finished);
        }
      }
      communicator.destroy();
    }
    nccl::Watchdog::completeAll(finished);
  }
};

// ---- NcclBackend ----

NcclBackend::NcclBackend(const BackendContext& context)
    : Backend("nccl", context.rank, context.size), impl_(std::make_shared<Impl>(context)) {
  if (context.fromParent) {
    impl_->communicator.adopt(*std::static_pointer_cast<nccl::Split>(context.fromParent));
    impl_->watchdog.start();
  }
}

NcclBackend::~NcclBackend() {
  shutdown();
}

void NcclBackend::shutdown() {
  impl_->shutdown();
}

void NcclBackend::abort(const std::string& reason) {
  // No wait: what is still on the stream is aborted at once.
  impl_->stop(std::chrono::steady_clock::now(), reason + "; ");
}

std::shared_ptr<void> NcclBackend::splitForSubgroup(const std::vector<int>& ranksInParent) {
  std::lock_guard<std::mutex> guard(impl_->mutex);
  return impl_->communicator.split(ranksInParent);
}

namespace {

int deviceOf(const Tensor& tensor, const char* op) {
  C10D_CHECK(tensor.device().isCUDA(), InvalidArgument, "nccl backend: ", op, " got ",
             tensor.describe(), "; the NCCL backend takes CUDA tensors");
  return tensor.device().index;
}

int deviceOf(const std::vector<Tensor>& tensors, const char* op) {
  int device = -1;
  for (const Tensor& t : tensors) device = deviceOf(t, op);
  return device;
}

using What = std::function<std::string()>;

}  // namespace

std::shared_ptr<Work> NcclBackend::broadcast(const Tensor& tensor,
                                             const BroadcastOptions& options) {
  return impl_->run(
      "broadcast", [=] { return detail::concat(tensor.describe(), " root ", options.rootRank); },
      deviceOf(tensor, "broadcast"), options.timeout, {tensor}, {},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        C10D_NCCL(ncclBroadcast(tensor.data(), tensor.data(), tensor.nbytes(), ncclUint8,
                                options.rootRank, comm, stream),
                  comm, what);
      });
}

namespace {

void allreduceOne(const Tensor& tensor, const ReduceOp& op, ncclComm_t comm, cudaStream_t stream,
                  const What& what) {
  nccl::Reduction reduce = nccl::reduction(op, tensor.dtype(), comm, "allreduce");
  ncclResult_t status =
      ncclAllReduce(tensor.data(), tensor.data(), tensor.numel(),
                    nccl::dataType(tensor.dtype(), "allreduce"), reduce.op, comm, stream);
  if (reduce.created) ncclRedOpDestroy(reduce.op, comm);
  nccl::check(status, "ncclAllReduce", comm, what);
}

}  // namespace

std::shared_ptr<Work> NcclBackend::allreduce(const Tensor& tensor,
                                             const AllreduceOptions& options) {
  nccl::checkReducible("allreduce", tensor.dtype(), options.reduceOp);
  return impl_->run(
      "allreduce", [=] { return detail::concat(tensor.describe(), " ", options.reduceOp); },
      deviceOf(tensor, "allreduce"), options.timeout, {tensor}, {},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        allreduceOne(tensor, options.reduceOp, comm, stream, what);
      });
}

std::shared_ptr<Work> NcclBackend::allreduceCoalesced(const std::vector<Tensor>& tensors,
                                                      const AllreduceOptions& options) {
  for (const Tensor& t : tensors)
    nccl::checkReducible("allreduce_coalesced", t.dtype(), options.reduceOp);
  return impl_->run(
      "allreduce_coalesced",
      [=] { return detail::concat(tensors.size(), " tensors ", options.reduceOp); },
      deviceOf(tensors, "allreduce_coalesced"), options.timeout, tensors, {},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        nccl::GroupGuard group(comm, what);
        for (const Tensor& t : tensors) allreduceOne(t, options.reduceOp, comm, stream, what);
        group.end();
      });
}

std::shared_ptr<Work> NcclBackend::reduce(const Tensor& tensor, const ReduceOptions& options) {
  nccl::checkReducible("reduce", tensor.dtype(), options.reduceOp);
  return impl_->run(
      "reduce",
      [=] {
        return detail::concat(tensor.describe(), " ", options.reduceOp, " root ", options.rootRank);
      },
      deviceOf(tensor, "reduce"), options.timeout, {tensor}, {},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        nccl::Reduction reduce = nccl::reduction(options.reduceOp, tensor.dtype(), comm, "reduce");
        ncclResult_t status = ncclReduce(tensor.data(), tensor.data(), tensor.numel(),
                                         nccl::dataType(tensor.dtype(), "reduce"), reduce.op,
                                         options.rootRank, comm, stream);
        if (reduce.created) ncclRedOpDestroy(reduce.op, comm);
        nccl::check(status, "ncclReduce", comm, what);
      });
}

std::shared_ptr<Work> NcclBackend::allgatherIntoTensor(const Tensor& output, const Tensor& input,
                                                       const AllgatherOptions& options) {
  deviceOf(output, "allgather_into_tensor");
  return impl_->run(
      "allgather_into_tensor", [=] { return input.describe(); },
      deviceOf(input, "allgather_into_tensor"), options.timeout, {output}, {input},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        C10D_NCCL(
            ncclAllGather(input.data(), output.data(), input.nbytes(), ncclUint8, comm, stream),
            comm, what);
      });
}

std::shared_ptr<Work> NcclBackend::allgather(const std::vector<Tensor>& outputs,
                                             const Tensor& input, const AllgatherOptions& options) {
  deviceOf(outputs, "allgather");
  return impl_->run(
      "allgather", [=] { return input.describe(); }, deviceOf(input, "allgather"), options.timeout,
      outputs, {input},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        void* flat = nullptr;
        size_t bytes = input.nbytes();
        C10D_CUDA(cudaMallocAsync(&flat, bytes * outputs.size() + 1, stream), what);
        ncclResult_t status = ncclAllGather(input.data(), flat, bytes, ncclUint8, comm, stream);
        for (size_t r = 0; r < outputs.size() && status == ncclSuccess; ++r) {
          C10D_CUDA(cudaMemcpyAsync(outputs[r].data(), static_cast<char*>(flat) + r * bytes, bytes,
                                    cudaMemcpyDeviceToDevice, stream),
                    what);
        }
        cudaFreeAsync(flat, stream);
        nccl::check(status, "ncclAllGather", comm, what);
      });
}

std::shared_ptr<Work> NcclBackend::gather(const std::vector<Tensor>& outputs, const Tensor& input,
                                          const GatherOptions& options) {
  int self = rank();
  return impl_->run(
      "gather", [=] { return detail::concat(input.describe(), " root ", options.rootRank); },
      deviceOf(input, "gather"), options.timeout, outputs, {input},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        nccl::GroupGuard group(comm, what);
        if (self == options.rootRank) {
          for (size_t r = 0; r < outputs.size(); ++r) {
            if (static_cast<int>(r) == self) {
              C10D_CUDA(cudaMemcpyAsync(outputs[r].data(), input.data(), input.nbytes(),
                                        cudaMemcpyDeviceToDevice, stream),
                        what);
            } else {
              C10D_NCCL(ncclRecv(outputs[r].data(), outputs[r].nbytes(), ncclUint8,
                                 static_cast<int>(r), comm, stream),
                        comm, what);
            }
          }
        } else {
          C10D_NCCL(
              ncclSend(input.data(), input.nbytes(), ncclUint8, options.rootRank, comm, stream),
              comm, what);
        }
        group.end();
      });
}

std::shared_ptr<Work> NcclBackend::scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                           const ScatterOptions& options) {
  int self = rank();
  return impl_->run(
      "scatter", [=] { return detail::concat(output.describe(), " root ", options.rootRank); },
      deviceOf(output, "scatter"), options.timeout, {output}, inputs,
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        nccl::GroupGuard group(comm, what);
        if (self == options.rootRank) {
          for (size_t r = 0; r < inputs.size(); ++r) {
            if (static_cast<int>(r) == self) {
              C10D_CUDA(cudaMemcpyAsync(output.data(), inputs[r].data(), output.nbytes(),
                                        cudaMemcpyDeviceToDevice, stream),
                        what);
            } else {
              C10D_NCCL(ncclSend(inputs[r].data(), inputs[r].nbytes(), ncclUint8,
                                 static_cast<int>(r), comm, stream),
                        comm, what);
            }
          }
        } else {
          C10D_NCCL(
              ncclRecv(output.data(), output.nbytes(), ncclUint8, options.rootRank, comm, stream),
              comm, what);
        }
        group.end();
      });
}

std::shared_ptr<Work> NcclBackend::reduceScatterTensor(const Tensor& output, const Tensor& input,
                                                       const ReduceScatterOptions& options) {
  nccl::checkReducible("reduce_scatter_tensor", output.dtype(), options.reduceOp);
  deviceOf(input, "reduce_scatter_tensor");
  return impl_->run(
      "reduce_scatter_tensor",
      [=] { return detail::concat(input.describe(), " ", options.reduceOp); },
      deviceOf(output, "reduce_scatter_tensor"), options.timeout, {output}, {input},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        nccl::Reduction reduce =
            nccl::reduction(options.reduceOp, output.dtype(), comm, "reduce_scatter");
        ncclResult_t status = ncclReduceScatter(input.data(), output.data(), output.numel(),
                                                nccl::dataType(output.dtype(), "reduce_scatter"),
                                                reduce.op, comm, stream);
        if (reduce.created) ncclRedOpDestroy(reduce.op, comm);
        nccl::check(status, "ncclReduceScatter", comm, what);
      });
}

std::shared_ptr<Work> NcclBackend::reduceScatter(const Tensor& output,
                                                 const std::vector<Tensor>& inputs,
                                                 const ReduceScatterOptions& options) {
  nccl::checkReducible("reduce_scatter", output.dtype(), options.reduceOp);
  deviceOf(inputs, "reduce_scatter");
  return impl_->run(
      "reduce_scatter", [=] { return detail::concat(output.describe(), " ", options.reduceOp); },
      deviceOf(output, "reduce_scatter"), options.timeout, {output}, inputs,
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        size_t bytes = output.nbytes();
        void* flat = nullptr;
        C10D_CUDA(cudaMallocAsync(&flat, bytes * inputs.size() + 1, stream), what);
        for (size_t r = 0; r < inputs.size(); ++r) {
          C10D_CUDA(cudaMemcpyAsync(static_cast<char*>(flat) + r * bytes, inputs[r].data(), bytes,
                                    cudaMemcpyDeviceToDevice, stream),
                    what);
        }
        nccl::Reduction reduce =
            nccl::reduction(options.reduceOp, output.dtype(), comm, "reduce_scatter");
        ncclResult_t status = ncclReduceScatter(flat, output.data(), output.numel(),
                                                nccl::dataType(output.dtype(), "reduce_scatter"),
                                                reduce.op, comm, stream);
        if (reduce.created) ncclRedOpDestroy(reduce.op, comm);
        cudaFreeAsync(flat, stream);
        nccl::check(status, "ncclReduceScatter", comm, what);
      });
}

std::shared_ptr<Work> NcclBackend::alltoall(const std::vector<Tensor>& outputs,
                                            const std::vector<Tensor>& inputs,
                                            const AllToAllOptions& options) {
  deviceOf(outputs, "alltoall");
  return impl_->run(
      "alltoall", [=] { return detail::concat(inputs.size(), " tensors"); },
      deviceOf(inputs, "alltoall"), options.timeout, outputs, inputs,
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        nccl::GroupGuard group(comm, what);
        for (size_t r = 0; r < inputs.size(); ++r) {
          C10D_NCCL(ncclSend(inputs[r].data(), inputs[r].nbytes(), ncclUint8, static_cast<int>(r),
                             comm, stream),
                    comm, what);
          C10D_NCCL(ncclRecv(outputs[r].data(), outputs[r].nbytes(), ncclUint8, static_cast<int>(r),
                             comm, stream),
                    comm, what);
        }
        group.end();
      });
}

std::shared_ptr<Work> NcclBackend::alltoallBase(const Tensor& output, const Tensor& input,
                                                const std::vector<int64_t>& outputSplitSizes,
                                                const std::vector<int64_t>& inputSplitSizes,
                                                const AllToAllOptions& options) {
  deviceOf(output, "alltoall_base");
  int groupSize = size();
  return impl_->run(
      "alltoall_base", [=] { return input.describe(); }, deviceOf(input, "alltoall_base"),
      options.timeout, {output}, {input},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        // Splits count rows of dim 0; empty means equal parts. Moved as bytes.
        auto rowBytes = [](const Tensor& t) {
          return t.dim() > 0 && t.sizes()[0] > 0 ? t.nbytes() / t.sizes()[0] : 0;
        };
        auto rows = [&](const Tensor& t, const std::vector<int64_t>& splits, int r) {
          return splits.empty() ? t.sizes()[0] / groupSize : splits[r];
        };
        size_t sendOffset = 0, recvOffset = 0;
        nccl::GroupGuard group(comm, what);
        for (int r = 0; r < groupSize; ++r) {
          size_t sendBytes = rows(input, inputSplitSizes, r) * rowBytes(input);
          size_t recvBytes = rows(output, outputSplitSizes, r) * rowBytes(output);
          C10D_NCCL(ncclSend(static_cast<char*>(input.data()) + sendOffset, sendBytes, ncclUint8, r,
                             comm, stream),
                    comm, what);
          C10D_NCCL(ncclRecv(static_cast<char*>(output.data()) + recvOffset, recvBytes, ncclUint8,
                             r, comm, stream),
                    comm, what);
          sendOffset += sendBytes;
          recvOffset += recvBytes;
        }
        group.end();
      });
}

std::shared_ptr<Work> NcclBackend::barrier(const BarrierOptions& options) {
  // An allreduce of one element on the group's device.
  return impl_->run("barrier", nullptr, -1, options.timeout, {}, {},
                    [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
                      void* word = nullptr;
                      C10D_CUDA(cudaMallocAsync(&word, sizeof(float), stream), what);
                      C10D_CUDA(cudaMemsetAsync(word, 0, sizeof(float), stream), what);
                      ncclResult_t status =
                          ncclAllReduce(word, word, 1, ncclFloat32, ncclSum, comm, stream);
                      cudaFreeAsync(word, stream);
                      nccl::check(status, "ncclAllReduce", comm, what);
                    });
}

std::shared_ptr<Work> NcclBackend::send(const Tensor& tensor, int dstRank, int tag,
                                        std::chrono::milliseconds timeout) {
  return impl_->run(
      "send", [=] { return detail::concat(tensor.describe(), " to rank ", dstRank, " tag ", tag); },
      deviceOf(tensor, "send"), timeout, {}, {tensor},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        C10D_NCCL(ncclSend(tensor.data(), tensor.nbytes(), ncclUint8, dstRank, comm, stream), comm,
                  what);
      });
}

std::shared_ptr<Work> NcclBackend::recv(const Tensor& tensor, int srcRank, int tag,
                                        std::chrono::milliseconds timeout) {
  auto work = impl_->run(
      "recv",
      [=] { return detail::concat(tensor.describe(), " from rank ", srcRank, " tag ", tag); },
      deviceOf(tensor, "recv"), timeout, {tensor}, {},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        C10D_NCCL(ncclRecv(tensor.data(), tensor.nbytes(), ncclUint8, srcRank, comm, stream), comm,
                  what);
      });
  work->setSourceRank(srcRank);
  return work;
}

std::vector<std::shared_ptr<Work>> NcclBackend::batchIsendIrecv(const std::vector<P2POp>& ops,
                                                                std::chrono::milliseconds timeout) {
  // One NCCL group for all, so sends and receives that depend on each other cannot deadlock;
  // every op's Work completes with the group.
  std::vector<Tensor> tensors;
  for (const P2POp& op : ops) tensors.push_back(op.tensor);
  auto work = impl_->run(
      "batch_isend_irecv", [n = ops.size()] { return detail::concat(n, " ops"); },
      deviceOf(tensors, "batch_isend_irecv"), timeout, tensors, {},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        nccl::GroupGuard group(comm, what);
        for (const P2POp& op : ops) {
          if (op.kind == P2POp::Send) {
            C10D_NCCL(
                ncclSend(op.tensor.data(), op.tensor.nbytes(), ncclUint8, op.peer, comm, stream),
                comm, what);
          } else {
            C10D_NCCL(
                ncclRecv(op.tensor.data(), op.tensor.nbytes(), ncclUint8, op.peer, comm, stream),
                comm, what);
          }
        }
        group.end();
      });
  return std::vector<std::shared_ptr<Work>>(ops.size(), work);
}

}  // namespace c10d::inline v0

C10D_DEFINE_BACKEND_LIBRARY(c10d::NcclBackend)
