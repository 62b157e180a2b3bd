// The NCCL backend: every op is enqueued on the group's stream (after the caller's current
// stream) under one mutex, with a CUDA event after it; a watchdog thread completes the Works as
// their events fire and aborts the communicator on an asynchronous error or a timeout.

#include "backends/nccl/NcclBackend.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <type_traits>

#include "backends/common/Describe.hpp"
#include "backends/common/Dispatch.hpp"
#include "c10d/BackendLibrary.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/CudaRuntime.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Half.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/core/ThreadName.hpp"
#include "store/Store.hpp"

namespace c10d::inline v0 {

namespace {

void ncclCheck(ncclResult_t status, const char* call, ncclComm_t comm,
               const std::function<std::string()>& what) {
  if (status == ncclSuccess) return;
  const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  C10D_THROW(BackendError, what(), ": ", call, " failed: ", ncclGetErrorString(status),
             last != nullptr && *last != '\0' ? std::string(" (") + last + ")" : std::string());
}

#define C10D_NCCL(call, comm, what) ncclCheck((call), #call, comm, what)

ncclDataType_t ncclType(ScalarType dtype, const char* op) {
  // ncclNumTypes stands for "NCCL has no such type" (C10D_NO_NCCL_TYPE in the dtype table).
  ncclDataType_t type = ncclNumTypes;
  switch (dtype) {
#define C10D_NO_NCCL_TYPE ncclNumTypes
#define C10D_NCCL_TYPE(name, type_, bytes, text, kind, dlpack, mpi, nccl) \
  case ScalarType::name:                                                  \
    type = nccl;                                                          \
    break;
    C10D_FORALL_SCALAR_TYPES(C10D_NCCL_TYPE)
#undef C10D_NCCL_TYPE
#undef C10D_NO_NCCL_TYPE
  }
  if (type != ncclNumTypes) return type;
  C10D_THROW(BackendError, "backend nccl does not support ", op, " on ", dtype,
             " (NCCL has no such type)");
}

// What NCCL cannot reduce, refused before any device work (and without a device): int16 (NCCL
// has no 16-bit integer type; ops that only move data send it as bytes) and the bitwise ops.
void checkReducible(const char* op, ScalarType dtype, const ReduceOp& reduceOp) {
  ncclType(dtype, op);
  ReduceOp::Kind kind = reduceOp.kind();
  bool boolAsLogical = dtype == ScalarType::Bool && kind != ReduceOp::BXOR;
  C10D_CHECK(
      boolAsLogical || (kind != ReduceOp::BAND && kind != ReduceOp::BOR && kind != ReduceOp::BXOR),
      BackendError, "backend nccl does not support ", op, " with ", reduceOp,
      " (NCCL has no bitwise reductions)");
}

// A reduction op for NCCL; PREMUL_SUM's is created per op and destroyed after enqueueing.
struct Reduction {
  ncclRedOp_t op = ncclSum;
  bool created = false;
};

// op is defined on dtype (ProcessGroup checked it); NCCL may still lack it.
Reduction reduction(const ReduceOp& op, ScalarType dtype, ncclComm_t comm, const char* name) {
  if (dtype == ScalarType::Bool) {
    // As 0/1 bytes: SUM, MAX and BOR are OR (max); PRODUCT, MIN and BAND are AND (min).
    switch (op.kind()) {
      case ReduceOp::SUM:
      case ReduceOp::MAX:
      case ReduceOp::BOR:
        return {ncclMax};
      case ReduceOp::PRODUCT:
      case ReduceOp::MIN:
      case ReduceOp::BAND:
        return {ncclMin};
      default:
        break;
    }
  }
  switch (op.kind()) {
    case ReduceOp::SUM:
      return {ncclSum};
    case ReduceOp::PRODUCT:
      return {ncclProd};
    case ReduceOp::MIN:
      return {ncclMin};
    case ReduceOp::MAX:
      return {ncclMax};
    case ReduceOp::AVG:
      return {ncclAvg};
    case ReduceOp::PREMUL_SUM: {
      Reduction result{ncclSum, true};
      ncclDataType_t type = ncclType(dtype, name);
      auto what = [name] { return std::string(name); };
      // The factor in the tensor's own type (integers truncate it, as c10d's CPU kernels do),
      // read by NCCL from host memory at the call.
      alignas(8) unsigned char scalar[8] = {};
      dispatchByDtype(dtype, [&]<typename T>() {
        T factor = static_cast<T>(static_cast<float>(op.factor()));
        if constexpr (std::is_same_v<T, double>) factor = op.factor();
        std::memcpy(scalar, &factor, sizeof(T));
      });
      C10D_NCCL(ncclRedOpCreatePreMulSum(&result.op, scalar, type, ncclScalarHostImmediate, comm),
                comm, what);
      return result;
    }
    default:
      C10D_THROW(BackendError, "backend nccl does not support ", name, " with ", op,
                 " (NCCL has no bitwise reductions)");
  }
}

}  // namespace

// ---- Work ----

class NcclWork : public Work {
 public:
  NcclWork(Describe describe, std::chrono::milliseconds timeout, std::vector<Tensor> outputs,
           std::vector<Tensor> keepAlive, cudaEvent_t done, bool blockingWait)
      : Work(std::move(describe), timeout, std::move(outputs)),
        keepAlive_(std::move(keepAlive)),
        done_(done),
        blockingWait_(blockingWait),
        deadline_(std::chrono::steady_clock::now() + timeout) {}
  ~NcclWork() override {
    if (done_ != nullptr) cudaEventDestroy(done_);
  }

  void wait(std::chrono::milliseconds timeout) override {
    if (!blockingWait_ && !isCompleted()) {
      // Later work on the caller's stream runs after the op; the host does not wait.
      C10D_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(currentCudaStream()), done_, 0),
                [&] { return description(); });
      return;
    }
    Work::wait(timeout);
  }

  // True once the op's event has fired; error is then its failure (null: it succeeded). The
  // caller completes the Work with complete(), outside the backend's lock.
  bool ready(std::exception_ptr& error) {
    cudaError_t status = cudaEventQuery(done_);
    if (status == cudaErrorNotReady) return false;
    keepAlive_.clear();
    if (status != cudaSuccess) {
      error = std::make_exception_ptr(
          BackendError(detail::concat(description(), ": CUDA reports ", cudaGetErrorName(status),
                                      " (", cudaGetErrorString(status), ")")));
    }
    return true;
  }
  void complete(const std::exception_ptr& error) {
    if (error) {
      finishWithError(error);
    } else {
      finish();
    }
  }

  std::chrono::steady_clock::time_point deadline() const { return deadline_; }

 private:
  std::vector<Tensor> keepAlive_;  // inputs the stream may still read
  cudaEvent_t done_;
  bool blockingWait_;
  std::chrono::steady_clock::time_point deadline_;
};

// What splitForSubgroup hands a member's new backend: its split communicator.
struct NcclSplit {
  ncclComm_t comm;
  int device;
};

struct NcclBackend::Impl {
  std::shared_ptr<Store> store;
  int rank;
  int size;
  std::chrono::milliseconds timeout;
  std::string group;
  bool blockingWait = false;
  int localRank = -1;

  std::mutex mutex;  // issue order of ops, the communicator, inflight
  ncclComm_t comm = nullptr;
  int device = -1;
  cudaStream_t stream = nullptr;
  std::string brokenBy;
  uint64_t sequence = 0;
  std::deque<std::shared_ptr<NcclWork>> inflight;
  std::condition_variable changed;
  bool stopping = false;
  std::thread watchdog;

  std::string where() const {
    return detail::concat("nccl backend of group '", group, "' rank ", rank);
  }

  // The device a group without tensors (barrier) uses: the local rank's, as launchers assign
  // them. Not the group rank: in a subgroup it says nothing about this host's GPUs.
  int defaultDevice() const {
    int count = cudaDeviceCount();
    C10D_CHECK(count > 0, BackendError, where(), ": no CUDA device is visible to this process");
    if (localRank >= 0) return localRank % count;
    C10D_CHECK(count == 1, InvalidArgument, where(), ": ", count,
               " CUDA devices are visible and nothing says which is this process's: launch with "
               "c10drun, torchrun, mpirun or srun (they set the local rank), set LOCAL_RANK or "
               "ProcessGroupOptions::localRank, or run a collective on a CUDA tensor first");
    return 0;
  }

  // Called with mutex held.
  void ensureComm(int wanted) {
    C10D_CHECK(brokenBy.empty(), BackendError, where(), ": the communicator was aborted (",
               brokenBy, "); create a new process group to continue");
    if (comm != nullptr) {
      C10D_CHECK(wanted == device, InvalidArgument, where(),
                 ": its communicator is on cuda:", device, ", a tensor is on cuda:", wanted,
                 "; one group serves one device");
      return;
    }
    auto what = [this] { return where(); };
    CudaDeviceGuard guard(wanted);
    ncclUniqueId id;
    if (rank == 0) {
      C10D_NCCL(ncclGetUniqueId(&id), nullptr, what);
      store->set("nccl/unique-id", Store::Bytes(reinterpret_cast<uint8_t*>(&id),
                                                reinterpret_cast<uint8_t*>(&id + 1)));
    }
    Store::Bytes bytes = store->get("nccl/unique-id", timeout);
    C10D_CHECK(bytes.size() == sizeof(id), BackendError, where(),
               ": the NCCL unique id in the store has ", bytes.size(), " bytes, expected ",
               sizeof(id));
    std::memcpy(&id, bytes.data(), sizeof(id));
    C10D_NCCL(ncclCommInitRank(&comm, size, id, rank), nullptr, what);
    device = wanted;
    createStream();
  }

  void createStream() {
    CudaDeviceGuard guard(device);
    C10D_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
              [this] { return where(); });
    startWatchdog();
  }

  void startWatchdog() {
    watchdog = std::thread([this] {
      detail::nameThisThread("c10d-nccl-wdog");
      detail::blockSigpipeInThisThread();
      watch();
    });
  }

  // Enqueues launch(comm, stream) after the caller's current stream and returns its Work.
  template <typename Launch>
  std::shared_ptr<Work> run(const char* op, std::function<std::string()> details, int onDevice,
                            std::chrono::milliseconds opTimeout, std::vector<Tensor> outputs,
                            std::vector<Tensor> inputs, Launch&& launch) {
    std::lock_guard<std::mutex> guard(mutex);
    C10D_CHECK(!stopping, StateError, op, ": ", where(), " was shut down");
    ensureComm(onDevice < 0 ? (device >= 0 ? device : defaultDevice()) : onDevice);
    uint64_t seq = sequence++;
    Work::Describe describe = describeCollective(op, std::move(details), group, seq);
    auto what = [&] { return detail::concat(describe(), " on rank ", rank); };
    CudaDeviceGuard deviceGuard(device);
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
    inflight.push_back(work);
    changed.notify_one();
    return work;
  }

  // Works the watchdog or shutdown found finished, with their errors: completed outside mutex,
  // since completing runs callbacks and a callback may issue the group's next op.
  using Finished = std::vector<std::pair<std::shared_ptr<NcclWork>, std::exception_ptr>>;

  void abortLocked(const std::string& reason, const std::shared_ptr<NcclWork>& late,
                   Finished& finished) {
    if (brokenBy.empty()) brokenBy = reason;
    C10D_LOG(Error, where(), ": ", reason, "; aborting the communicator");
    if (comm != nullptr) ncclCommAbort(comm);
    comm = nullptr;
    for (auto& work : inflight) {
      std::string message = detail::concat(work->description(), " on rank ", rank, ": ", reason,
                                           "; the communicator was aborted");
      if (work == late) {
        finished.emplace_back(work, std::make_exception_ptr(TimeoutError(message)));
      } else {
        finished.emplace_back(work, std::make_exception_ptr(BackendError(message)));
      }
    }
    inflight.clear();
  }

  // Moves the leading in-flight Works whose events fired into finished.
  void collectReadyLocked(Finished& finished) {
    std::exception_ptr error;
    while (!inflight.empty() && inflight.front()->ready(error)) {
      finished.emplace_back(std::move(inflight.front()), error);
      inflight.pop_front();
      error = nullptr;
    }
  }

  static void completeAll(Finished& finished) {
    for (auto& [work, error] : finished) work->complete(error);
    finished.clear();
  }

  void watch() {
    Finished finished;
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      changed.wait_for(lock, std::chrono::milliseconds(inflight.empty() ? 500 : 1));
      if (comm == nullptr) continue;
      {
        CudaDeviceGuard guard(device);
        collectReadyLocked(finished);
        ncclResult_t asyncError = ncclSuccess;
        if (ncclCommGetAsyncError(comm, &asyncError) == ncclSuccess && asyncError != ncclSuccess &&
            asyncError != ncclInProgress) {
          abortLocked(detail::concat("NCCL reported an asynchronous error: ",
                                     ncclGetErrorString(asyncError)),
                      nullptr, finished);
        } else {
          auto now = std::chrono::steady_clock::now();
          for (auto& work : inflight) {
            if (now >= work->deadline()) {
              auto late = work;
              abortLocked(detail::concat(late->description(), " timed out after ",
                                         late->timeout().count(), " ms"),
                          late, finished);
              break;
            }
          }
        }
      }
      if (finished.empty()) continue;
      lock.unlock();
      completeAll(finished);
      lock.lock();
    }
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> guard(mutex);
      if (stopping) return;
      stopping = true;
    }
    changed.notify_all();
    if (watchdog.joinable()) watchdog.join();
    Finished finished;
    {
      std::lock_guard<std::mutex> guard(mutex);
      if (comm != nullptr) {
        CudaDeviceGuard deviceGuard(device);
        // Pending ops finish first; a destroy that fails still leaves the first error logged.
        if (stream != nullptr) cudaStreamSynchronize(stream);
        collectReadyLocked(finished);
        for (auto& work : inflight) {
          finished.emplace_back(work, std::make_exception_ptr(StateError(detail::concat(
                                          work->description(), " on rank ", rank,
                                          ": the backend shut down before it finished"))));
        }
        inflight.clear();
        ncclResult_t status = ncclCommDestroy(comm);
        if (status != ncclSuccess) {
          C10D_LOG(Warning, where(), ": ncclCommDestroy failed: ", ncclGetErrorString(status));
        }
        comm = nullptr;
      }
      if (stream != nullptr) cudaStreamDestroy(stream);
      stream = nullptr;
    }
    completeAll(finished);
  }
};

// ---- NcclBackend ----

NcclBackend::NcclBackend(const BackendContext& context)
    : Backend("nccl", context.rank, context.size), impl_(std::make_shared<Impl>()) {
  impl_->store = context.store;
  impl_->rank = context.rank;
  impl_->size = context.size;
  impl_->timeout = context.timeout;
  impl_->group = context.groupName;
  impl_->blockingWait = context.settings.flag("C10D_NCCL_BLOCKING_WAIT").value_or(false);
  impl_->localRank = context.localRank;
  if (context.fromParent) {
    auto split = std::static_pointer_cast<NcclSplit>(context.fromParent);
    impl_->comm = split->comm;
    impl_->device = split->device;
    impl_->createStream();
  }
}

NcclBackend::~NcclBackend() {
  shutdown();
}

void NcclBackend::shutdown() {
  impl_->shutdown();
}

std::shared_ptr<void> NcclBackend::splitForSubgroup(const std::vector<int>& ranksInParent) {
  std::lock_guard<std::mutex> guard(impl_->mutex);
  // A parent that never made its communicator has nothing to split: the subgroup makes its own
  // from a unique id when it first needs one (every rank is in the same state, as ops are
  // issued in the same order everywhere).
  if (impl_->comm == nullptr) return nullptr;
  auto position = std::find(ranksInParent.begin(), ranksInParent.end(), rank());
  bool member = position != ranksInParent.end();
  int color =
      member ? *std::min_element(ranksInParent.begin(), ranksInParent.end()) : NCCL_SPLIT_NOCOLOR;
  int key = member ? static_cast<int>(position - ranksInParent.begin()) : 0;
  ncclComm_t child = nullptr;
  CudaDeviceGuard deviceGuard(impl_->device);
  C10D_NCCL(ncclCommSplit(impl_->comm, color, key, &child, nullptr), impl_->comm,
            [&] { return detail::concat(impl_->where(), ": ncclCommSplit for a subgroup"); });
  if (!member) return nullptr;
  return std::make_shared<NcclSplit>(NcclSplit{child, impl_->device});
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
  Reduction reduce = reduction(op, tensor.dtype(), comm, "allreduce");
  ncclResult_t status =
      ncclAllReduce(tensor.data(), tensor.data(), tensor.numel(),
                    ncclType(tensor.dtype(), "allreduce"), reduce.op, comm, stream);
  if (reduce.created) ncclRedOpDestroy(reduce.op, comm);
  ncclCheck(status, "ncclAllReduce", comm, what);
}

}  // namespace

std::shared_ptr<Work> NcclBackend::allreduce(const Tensor& tensor,
                                             const AllreduceOptions& options) {
  checkReducible("allreduce", tensor.dtype(), options.reduceOp);
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
    checkReducible("allreduce_coalesced", t.dtype(), options.reduceOp);
  return impl_->run(
      "allreduce_coalesced",
      [=] { return detail::concat(tensors.size(), " tensors ", options.reduceOp); },
      deviceOf(tensors, "allreduce_coalesced"), options.timeout, tensors, {},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        C10D_NCCL(ncclGroupStart(), comm, what);
        for (const Tensor& t : tensors) allreduceOne(t, options.reduceOp, comm, stream, what);
        C10D_NCCL(ncclGroupEnd(), comm, what);
      });
}

std::shared_ptr<Work> NcclBackend::reduce(const Tensor& tensor, const ReduceOptions& options) {
  checkReducible("reduce", tensor.dtype(), options.reduceOp);
  return impl_->run(
      "reduce",
      [=] {
        return detail::concat(tensor.describe(), " ", options.reduceOp, " root ", options.rootRank);
      },
      deviceOf(tensor, "reduce"), options.timeout, {tensor}, {},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        Reduction reduce = reduction(options.reduceOp, tensor.dtype(), comm, "reduce");
        ncclResult_t status = ncclReduce(tensor.data(), tensor.data(), tensor.numel(),
                                         ncclType(tensor.dtype(), "reduce"), reduce.op,
                                         options.rootRank, comm, stream);
        if (reduce.created) ncclRedOpDestroy(reduce.op, comm);
        ncclCheck(status, "ncclReduce", comm, what);
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
        ncclCheck(status, "ncclAllGather", comm, what);
      });
}

std::shared_ptr<Work> NcclBackend::gather(const std::vector<Tensor>& outputs, const Tensor& input,
                                          const GatherOptions& options) {
  int self = rank();
  return impl_->run(
      "gather", [=] { return detail::concat(input.describe(), " root ", options.rootRank); },
      deviceOf(input, "gather"), options.timeout, outputs, {input},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        C10D_NCCL(ncclGroupStart(), comm, what);
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
        C10D_NCCL(ncclGroupEnd(), comm, what);
      });
}

std::shared_ptr<Work> NcclBackend::scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                           const ScatterOptions& options) {
  int self = rank();
  return impl_->run(
      "scatter", [=] { return detail::concat(output.describe(), " root ", options.rootRank); },
      deviceOf(output, "scatter"), options.timeout, {output}, inputs,
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        C10D_NCCL(ncclGroupStart(), comm, what);
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
        C10D_NCCL(ncclGroupEnd(), comm, what);
      });
}

std::shared_ptr<Work> NcclBackend::reduceScatterTensor(const Tensor& output, const Tensor& input,
                                                       const ReduceScatterOptions& options) {
  checkReducible("reduce_scatter_tensor", output.dtype(), options.reduceOp);
  deviceOf(input, "reduce_scatter_tensor");
  return impl_->run(
      "reduce_scatter_tensor",
      [=] { return detail::concat(input.describe(), " ", options.reduceOp); },
      deviceOf(output, "reduce_scatter_tensor"), options.timeout, {output}, {input},
      [&](ncclComm_t comm, cudaStream_t stream, const What& what) {
        Reduction reduce = reduction(options.reduceOp, output.dtype(), comm, "reduce_scatter");
        ncclResult_t status =
            ncclReduceScatter(input.data(), output.data(), output.numel(),
                              ncclType(output.dtype(), "reduce_scatter"), reduce.op, comm, stream);
        if (reduce.created) ncclRedOpDestroy(reduce.op, comm);
        ncclCheck(status, "ncclReduceScatter", comm, what);
      });
}

std::shared_ptr<Work> NcclBackend::reduceScatter(const Tensor& output,
                                                 const std::vector<Tensor>& inputs,
                                                 const ReduceScatterOptions& options) {
  checkReducible("reduce_scatter", output.dtype(), options.reduceOp);
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
        Reduction reduce = reduction(options.reduceOp, output.dtype(), comm, "reduce_scatter");
        ncclResult_t status =
            ncclReduceScatter(flat, output.data(), output.numel(),
                              ncclType(output.dtype(), "reduce_scatter"), reduce.op, comm, stream);
        if (reduce.created) ncclRedOpDestroy(reduce.op, comm);
        cudaFreeAsync(flat, stream);
        ncclCheck(status, "ncclReduceScatter", comm, what);
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
        C10D_NCCL(ncclGroupStart(), comm, what);
        for (size_t r = 0; r < inputs.size(); ++r) {
          C10D_NCCL(ncclSend(inputs[r].data(), inputs[r].nbytes(), ncclUint8, static_cast<int>(r),
                             comm, stream),
                    comm, what);
          C10D_NCCL(ncclRecv(outputs[r].data(), outputs[r].nbytes(), ncclUint8, static_cast<int>(r),
                             comm, stream),
                    comm, what);
        }
        C10D_NCCL(ncclGroupEnd(), comm, what);
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
        C10D_NCCL(ncclGroupStart(), comm, what);
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
        C10D_NCCL(ncclGroupEnd(), comm, what);
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
                      ncclCheck(status, "ncclAllReduce", comm, what);
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
        C10D_NCCL(ncclGroupStart(), comm, what);
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
        C10D_NCCL(ncclGroupEnd(), comm, what);
      });
  return std::vector<std::shared_ptr<Work>>(ops.size(), work);
}

}  // namespace c10d::inline v0

C10D_DEFINE_BACKEND_LIBRARY(c10d::NcclBackend)
