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

#include "backends/nccl/NcclCommunicator.hpp"
#include "backends/nccl/NcclTypes.hpp"
#include "backends/nccl/NcclWatchdog.hpp"
#include "c10d/BackendLibrary.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/CudaRuntime.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

struct NcclBackend::Impl {
  explicit Impl(const BackendContext& context)
      : communicator(context),
        watchdog(mutex, communicator),
        blockingWait(context.settings.flag("C10D_NCCL_BLOCKING_WAIT").value_or(false)),
        timeout(context.timeout),
        trace(context.trace) {}

  std::mutex mutex;  // issue order of ops, the communicator, the watchdog's in-flight Works
  nccl::Communicator communicator;
  nccl::Watchdog watchdog;
  bool blockingWait;
  std::chrono::milliseconds timeout;  // the group's: how long shutdown waits for pending ops
  std::shared_ptr<detail::GroupTrace> trace;

  // Enqueues launch(comm, stream) for op after the caller's current stream and returns its Work.
  template <typename Launch>
  std::shared_ptr<NcclWork> run(const Op& op, int onDevice, std::vector<Tensor> outputs,
                                std::vector<Tensor> inputs, Launch&& launch) {
    std::lock_guard<std::mutex> guard(mutex);
    C10D_CHECK(!watchdog.stopping(), StateError, c10d::name(op.type), ": ", communicator.where(),
               " was shut down");
    // The group's first op makes the communicator, and the watchdog's thread with it.
    if (communicator.ensure(onDevice)) watchdog.start();
    auto what = [&] {
      return detail::concat(describeNumbered(op, &communicator.group()), " on rank ",
                            communicator.rank());
    };
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
    auto work = std::make_shared<NcclWork>(op, trace, std::move(outputs), std::move(inputs), done,
                                           blockingWait);
    // A receive's sender is its peer (NCCL receives from one): set before the watchdog can
    // complete the Work.
    if (op.type == OpType::Recv) work->setSourceRank(op.peer);
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

using Impl = NcclBackend::Impl;
using What = std::function<std::string()>;

int deviceOf(const Tensor& tensor, const Op& op) {
  C10D_CHECK(tensor.device().isCUDA(), InvalidArgument, "nccl backend: ", name(op.type), " got ",
             tensor.describe(), "; the NCCL backend takes CUDA tensors");
  return tensor.device().index;
}

int deviceOf(const std::vector<Tensor>& tensors, const Op& op) {
  int device = -1;
  for (const Tensor& t : tensors) device = deviceOf(t, op);
  return device;
}

std::shared_ptr<Work> broadcast(Impl& impl, const Op& op, const OpTensors& t) {
  const Tensor& tensor = *t.input;
  return impl.run(op, deviceOf(tensor, op), {tensor}, {},
                  [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
                    C10D_NCCL(ncclBroadcast(tensor.data(), tensor.data(), tensor.nbytes(),
                                            ncclUint8, op.root, comm, stream),
                              comm, what);
                  });
}

void allreduceOne(const Tensor& tensor, const ReduceOp& op, ncclComm_t comm, cudaStream_t stream,
                  const What& what) {
  nccl::Reduction reduce = nccl::reduction(op, tensor.dtype(), comm, "allreduce");
  ncclResult_t status =
      ncclAllReduce(tensor.data(), tensor.data(), tensor.numel(),
                    nccl::dataType(tensor.dtype(), "allreduce"), reduce.op, comm, stream);
  if (reduce.created) ncclRedOpDestroy(reduce.op, comm);
  nccl::check(status, "ncclAllReduce", comm, what);
}

std::shared_ptr<Work> allreduce(Impl& impl, const Op& op, const OpTensors& t) {
  const Tensor& tensor = *t.input;
  nccl::checkReducible("allreduce", tensor.dtype(), op.reduceOp);
  return impl.run(op, deviceOf(tensor, op), {tensor}, {},
                  [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
                    allreduceOne(tensor, op.reduceOp, comm, stream, what);
                  });
}

std::shared_ptr<Work> allreduceCoalesced(Impl& impl, const Op& op, const OpTensors& t) {
  const std::vector<Tensor>& tensors = *t.inputs;
  for (const Tensor& tensor : tensors) {
    nccl::checkReducible("allreduce_coalesced", tensor.dtype(), op.reduceOp);
  }
  return impl.run(op, deviceOf(tensors, op), tensors, {},
                  [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
                    nccl::GroupGuard group(comm, what);
                    for (const Tensor& tensor : tensors) {
                      allreduceOne(tensor, op.reduceOp, comm, stream, what);
                    }
                    group.end();
                  });
}

std::shared_ptr<Work> reduce(Impl& impl, const Op& op, const OpTensors& t) {
  const Tensor& tensor = *t.input;
  nccl::checkReducible("reduce", tensor.dtype(), op.reduceOp);
  return impl.run(op, deviceOf(tensor, op), {tensor}, {},
                  [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
                    nccl::Reduction reduce =
                        nccl::reduction(op.reduceOp, tensor.dtype(), comm, "reduce");
                    ncclResult_t status = ncclReduce(tensor.data(), tensor.data(), tensor.numel(),
                                                     nccl::dataType(tensor.dtype(), "reduce"),
                                                     reduce.op, op.root, comm, stream);
                    if (reduce.created) ncclRedOpDestroy(reduce.op, comm);
                    nccl::check(status, "ncclReduce", comm, what);
                  });
}

std::shared_ptr<Work> allgatherIntoTensor(Impl& impl, const Op& op, const OpTensors& t) {
  const Tensor& input = *t.input;
  const Tensor& output = *t.output;
  deviceOf(output, op);
  return impl.run(op, deviceOf(input, op), {output}, {input},
                  [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
                    C10D_NCCL(ncclAllGather(input.data(), output.data(), input.nbytes(), ncclUint8,
                                            comm, stream),
                              comm, what);
                  });
}

std::shared_ptr<Work> allgather(Impl& impl, const Op& op, const OpTensors& t) {
  const Tensor& input = *t.input;
  const std::vector<Tensor>& outputs = *t.outputs;
  deviceOf(outputs, op);
  return impl.run(
      op, deviceOf(input, op), outputs, {input},
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

std::shared_ptr<Work> gather(Impl& impl, const Op& op, const OpTensors& t) {
  const Tensor& input = *t.input;
  const std::vector<Tensor>& outputs = *t.outputs;
  const int self = impl.communicator.rank();
  return impl.run(op, deviceOf(input, op), outputs, {input},
                  [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
                    nccl::GroupGuard group(comm, what);
                    if (self == op.root) {
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
                          ncclSend(input.data(), input.nbytes(), ncclUint8, op.root, comm, stream),
                          comm, what);
                    }
                    group.end();
                  });
}

std::shared_ptr<Work> scatter(Impl& impl, const Op& op, const OpTensors& t) {
  const Tensor& output = *t.output;
  const std::vector<Tensor>& inputs = *t.inputs;
  const int self = impl.communicator.rank();
  return impl.run(
      op, deviceOf(output, op), {output}, inputs,
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        nccl::GroupGuard group(comm, what);
        if (self == op.root) {
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
          C10D_NCCL(ncclRecv(output.data(), output.nbytes(), ncclUint8, op.root, comm, stream),
                    comm, what);
        }
        group.end();
      });
}

std::shared_ptr<Work> reduceScatterTensor(Impl& impl, const Op& op, const OpTensors& t) {
  const Tensor& input = *t.input;
  const Tensor& output = *t.output;
  nccl::checkReducible("reduce_scatter_tensor", output.dtype(), op.reduceOp);
  deviceOf(input, op);
  return impl.run(op, deviceOf(output, op), {output}, {input},
                  [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
                    nccl::Reduction reduce =
                        nccl::reduction(op.reduceOp, output.dtype(), comm, "reduce_scatter");
                    ncclResult_t status = ncclReduceScatter(
                        input.data(), output.data(), output.numel(),
                        nccl::dataType(output.dtype(), "reduce_scatter"), reduce.op, comm, stream);
                    if (reduce.created) ncclRedOpDestroy(reduce.op, comm);
                    nccl::check(status, "ncclReduceScatter", comm, what);
                  });
}

std::shared_ptr<Work> reduceScatter(Impl& impl, const Op& op, const OpTensors& t) {
  const Tensor& output = *t.output;
  const std::vector<Tensor>& inputs = *t.inputs;
  nccl::checkReducible("reduce_scatter", output.dtype(), op.reduceOp);
  deviceOf(inputs, op);
  return impl.run(
      op, deviceOf(output, op), {output}, inputs,
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
            nccl::reduction(op.reduceOp, output.dtype(), comm, "reduce_scatter");
        ncclResult_t status = ncclReduceScatter(flat, output.data(), output.numel(),
                                                nccl::dataType(output.dtype(), "reduce_scatter"),
                                                reduce.op, comm, stream);
        if (reduce.created) ncclRedOpDestroy(reduce.op, comm);
        cudaFreeAsync(flat, stream);
        nccl::check(status, "ncclReduceScatter", comm, what);
      });
}

std::shared_ptr<Work> alltoall(Impl& impl, const Op& op, const OpTensors& t) {
  const std::vector<Tensor>& inputs = *t.inputs;
  const std::vector<Tensor>& outputs = *t.outputs;
  deviceOf(outputs, op);
  return impl.run(op, deviceOf(inputs, op), outputs, inputs,
                  [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
                    nccl::GroupGuard group(comm, what);
                    for (size_t r = 0; r < inputs.size(); ++r) {
                      C10D_NCCL(ncclSend(inputs[r].data(), inputs[r].nbytes(), ncclUint8,
                                         static_cast<int>(r), comm, stream),
                                comm, what);
                      C10D_NCCL(ncclRecv(outputs[r].data(), outputs[r].nbytes(), ncclUint8,
                                         static_cast<int>(r), comm, stream),
                                comm, what);
                    }
                    group.end();
                  });
}

std::shared_ptr<Work> alltoallBase(Impl& impl, const Op& op, const OpTensors& t) {
  const Tensor& input = *t.input;
  const Tensor& output = *t.output;
  const std::vector<int64_t>& inputSplits = *t.inputSplits;
  const std::vector<int64_t>& outputSplits = *t.outputSplits;
  deviceOf(output, op);
  const int groupSize = impl.communicator.size();
  return impl.run(
      op, deviceOf(input, op), {output}, {input},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        // Splits count rows of dim 0; empty means equal parts. Moved as bytes.
        auto rowBytes = [](const Tensor& tensor) {
          return tensor.dim() > 0 && tensor.sizes()[0] > 0 ? tensor.nbytes() / tensor.sizes()[0]
                                                           : 0;
        };
        auto rows = [&](const Tensor& tensor, const std::vector<int64_t>& splits, int r) {
          return splits.empty() ? tensor.sizes()[0] / groupSize : splits[r];
        };
        size_t sendOffset = 0, recvOffset = 0;
        nccl::GroupGuard group(comm, what);
        for (int r = 0; r < groupSize; ++r) {
          size_t sendBytes = rows(input, inputSplits, r) * rowBytes(input);
          size_t recvBytes = rows(output, outputSplits, r) * rowBytes(output);
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

std::shared_ptr<Work> barrier(Impl& impl, const Op& op, const OpTensors&) {
  // An allreduce of one element on the group's device.
  return impl.run(op, -1, {}, {}, [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
    void* word = nullptr;
    C10D_CUDA(cudaMallocAsync(&word, sizeof(float), stream), what);
    C10D_CUDA(cudaMemsetAsync(word, 0, sizeof(float), stream), what);
    ncclResult_t status = ncclAllReduce(word, word, 1, ncclFloat32, ncclSum, comm, stream);
    cudaFreeAsync(word, stream);
    nccl::check(status, "ncclAllReduce", comm, what);
  });
}

std::shared_ptr<Work> send(Impl& impl, const Op& op, const OpTensors& t) {
  const Tensor& tensor = *t.input;
  return impl.run(op, deviceOf(tensor, op), {}, {tensor},
                  [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
                    C10D_NCCL(
                        ncclSend(tensor.data(), tensor.nbytes(), ncclUint8, op.peer, comm, stream),
                        comm, what);
                  });
}

std::shared_ptr<Work> recv(Impl& impl, const Op& op, const OpTensors& t) {
  const Tensor& tensor = *t.input;
  return impl.run(op, deviceOf(tensor, op), {tensor}, {},
                  [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
                    C10D_NCCL(
                        ncclRecv(tensor.data(), tensor.nbytes(), ncclUint8, op.peer, comm, stream),
                        comm, what);
                  });
}

// Each op's function, by OpType (null: NCCL has no receive from any source).
constexpr std::shared_ptr<Work> (*kStart[])(Impl&, const Op&, const OpTensors&) = {
    broadcast,
    allreduce,
    allreduceCoalesced,
    reduce,
    allgather,
    allgatherIntoTensor,
    gather,
    scatter,
    reduceScatter,
    reduceScatterTensor,
    alltoall,
    alltoallBase,
    barrier,
    send,
    recv,
    nullptr,
};
static_assert(std::size(kStart) == kOpTypes);

}  // namespace

std::shared_ptr<Work> NcclBackend::start(const Op& op, const OpTensors& tensors) {
  auto fn = kStart[static_cast<size_t>(op.type)];
  if (fn == nullptr) unsupported(std::string(c10d::name(op.type)).c_str());
  return fn(*impl_, op, tensors);
}

std::vector<std::shared_ptr<Work>> NcclBackend::startBatch(const std::vector<Op>& ops,
                                                           const std::vector<P2POp>& p2p) {
  // One NCCL group for all, so sends and receives that depend on each other cannot deadlock;
  // every op's Work completes with the group (it is the first op's).
  std::vector<Tensor> tensors;
  for (const P2POp& op : p2p) tensors.push_back(op.tensor);
  Op first = ops.at(0);
  auto work = impl_->run(first, deviceOf(tensors, first), tensors, {},
                         [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
                           nccl::GroupGuard group(comm, what);
                           for (const P2POp& op : p2p) {
                             if (op.kind == P2POp::Send) {
                               C10D_NCCL(ncclSend(op.tensor.data(), op.tensor.nbytes(), ncclUint8,
                                                  op.peer, comm, stream),
                                         comm, what);
                             } else {
                               C10D_NCCL(ncclRecv(op.tensor.data(), op.tensor.nbytes(), ncclUint8,
                                                  op.peer, comm, stream),
                                         comm, what);
                             }
                           }
                           group.end();
                         });
  return std::vector<std::shared_ptr<Work>>(ops.size(), work);
}

}  // namespace c10d::inline v1

C10D_DEFINE_BACKEND_LIBRARY(c10d::NcclBackend)
