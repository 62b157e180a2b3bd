// The MPI backend: each collective is one MPI call on the backend's communicator, run through
// the op queue (issue order, caller's thread when it waits at once); point-to-point ops are
// MPI requests (MpiProgress.cpp).

#include "backends/mpi/MpiBackend.hpp"

#include <algorithm>
#include <cstring>

#include "backends/common/Describe.hpp"
#include "backends/common/Flatten.hpp"
#include "backends/common/OpQueue.hpp"
#include "backends/common/Reduce.hpp"
#include "backends/mpi/MpiProgress.hpp"
#include "backends/mpi/MpiTypes.hpp"
#include "c10d/BackendLibrary.hpp"
#include "c10d/core/Exception.hpp"
#include "store/HashStore.hpp"

namespace c10d::inline v0 {

MpiBackend::MpiBackend(const BackendContext& context) : QueuedBackend("mpi", context) {
  mpi::ensureInitialized();
  auto where = [&] { return detail::concat("mpi backend of group '", groupName(), "'"); };
  if (context.fromParent) {
    owned_ = std::static_pointer_cast<mpi::Communicator>(context.fromParent);
  } else {
    MPI_Comm dup = MPI_COMM_NULL;
    C10D_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup), where);
    owned_ = std::make_shared<mpi::Communicator>(dup);
  }
  comm_ = owned_->comm;
  // Errors come back as codes that name the op, instead of MPI ending the job.
  C10D_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), where);
  int commRank = -1, commSize = -1;
  C10D_MPI_CHECK(MPI_Comm_rank(comm_, &commRank), where);
  C10D_MPI_CHECK(MPI_Comm_size(comm_, &commSize), where);
  C10D_CHECK(commRank == context.rank && commSize == context.size, BackendError, where(),
             ": MPI puts this process at rank ", commRank, " of ", commSize,
             ", the process group at rank ", context.rank, " of ", context.size,
             context.fromParent ? ""
                                : ". Start every rank with mpirun (not with c10drun), and "
                                  "leave RANK/WORLD_SIZE unset or equal to MPI's");
  int* tagUpperBound = nullptr;
  int found = 0;
  C10D_MPI_CHECK(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tagUpperBound, &found), where);
  if (found && tagUpperBound != nullptr) tagUpperBound_ = *tagUpperBound;
  progress_ = std::make_shared<Progress>(
      groupName(), context.rank, context.settings.flag("C10D_MPI_ABORT_ON_TIMEOUT").value_or(true));
  startQueue();
}

MpiBackend::~MpiBackend() {
  shutdown();
}

void MpiBackend::stopAfterQueue() {
  progress_->stop();
}

std::shared_ptr<Work> MpiBackend::enqueue(const char* op, std::function<std::string()> details,
                                          std::chrono::milliseconds timeout,
                                          std::vector<Tensor> outputs, std::function<void()> fn) {
  return QueuedBackend::enqueue(
      op, std::move(details), timeout, std::move(outputs),
      [progress = progress_, timeout, rank = rank(), fn = std::move(fn)](QueuedWork& self,
                                                                         uint64_t) {
        Progress::RunningCollective running(*progress, self.describer(), timeout);
        try {
          fn();
        } catch (const BackendError& e) {
          C10D_THROW(BackendError, self.description(), " on rank ", rank, ": ", e.what());
        }
      });
}

std::shared_ptr<void> MpiBackend::splitForSubgroup(const std::vector<int>& ranksInParent) {
  auto position = std::find(ranksInParent.begin(), ranksInParent.end(), rank());
  bool member = position != ranksInParent.end();
  // Disjoint subgroups of one split differ in their lowest rank, which makes a color.
  int color =
      member ? *std::min_element(ranksInParent.begin(), ranksInParent.end()) : MPI_UNDEFINED;
  int key = member ? static_cast<int>(position - ranksInParent.begin()) : 0;
  auto result = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  MPI_Comm comm = comm_;
  enqueue("new_group", nullptr, std::chrono::hours(24), {}, [comm, color, key, result] {
    C10D_MPI_CHECK(MPI_Comm_split(comm, color, key, result.get()),
                   [] { return std::string("communicator split"); });
  })->wait();
  if (*result == MPI_COMM_NULL) return nullptr;
  return std::make_shared<mpi::Communicator>(*result);
}

// ---- collectives ----

std::shared_ptr<Work> MpiBackend::broadcast(const Tensor& tensor, const BroadcastOptions& options) {
  checkCPU(tensor, "broadcast");
  MPI_Comm comm = comm_;
  return enqueue(
      "broadcast", [=] { return detail::concat(tensor.describe(), " root ", options.rootRank); },
      options.timeout, {tensor},
      [=] {
        auto what = [] { return std::string("broadcast"); };
        C10D_MPI_CHECK(MPI_Bcast(tensor.data(), mpi::count(tensor.numel(), what),
                                 mpi::datatype(tensor.dtype()), options.rootRank, comm),
                       what);
      });
}

namespace {

void allreduceInPlace(const Tensor& tensor, const ReduceOp& op, int groupSize, MPI_Comm comm,
                      const char* name) {
  auto what = [name] { return std::string(name); };
  ScalarType dtype = tensor.dtype();
  size_t n = tensor.numel();
  prepareReduce(op, dtype, tensor.data(), n);
  C10D_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, tensor.data(), mpi::count(n, what),
                               mpi::datatype(dtype), mpi::combineOp(op, dtype), comm),
                 what);
  finishReduce(op, dtype, tensor.data(), n, groupSize);
}

}  // namespace

std::shared_ptr<Work> MpiBackend::allreduce(const Tensor& tensor, const AllreduceOptions& options) {
  checkCPU(tensor, "allreduce");
  MPI_Comm comm = comm_;
  int groupSize = size();
  return enqueue(
      "allreduce", [=] { return detail::concat(tensor.describe(), " ", options.reduceOp); },
      options.timeout, {tensor},
      [=] { allreduceInPlace(tensor, options.reduceOp, groupSize, comm, "allreduce"); });
}

std::shared_ptr<Work> MpiBackend::allreduceCoalesced(const std::vector<Tensor>& tensors,
                                                     const AllreduceOptions& options) {
  for (const Tensor& t : tensors) checkCPU(t, "allreduce_coalesced");
  MPI_Comm comm = comm_;
  int groupSize = size();
  return enqueue(
      "allreduce_coalesced",
      [=] { return detail::concat(tensors.size(), " tensors ", options.reduceOp); },
      options.timeout, tensors,
      [=] {
        for (const Tensor& tensor : tensors) {
          allreduceInPlace(tensor, options.reduceOp, groupSize, comm, "allreduce_coalesced");
        }
      });
}

std::shared_ptr<Work> MpiBackend::reduce(const Tensor& tensor, const ReduceOptions& options) {
  checkCPU(tensor, "reduce");
  MPI_Comm comm = comm_;
  int groupSize = size();
  bool root = rank() == options.rootRank;
  return enqueue(
      "reduce",
      [=] {
        return detail::concat(tensor.describe(), " ", options.reduceOp, " root ", options.rootRank);
      },
      options.timeout, {tensor},
      [=] {
        auto what = [] { return std::string("reduce"); };
        ScalarType dtype = tensor.dtype();
        size_t n = tensor.numel();
        prepareReduce(options.reduceOp, dtype, tensor.data(), n);
        C10D_MPI_CHECK(
            MPI_Reduce(root ? MPI_IN_PLACE : tensor.data(), root ? tensor.data() : nullptr,
                       mpi::count(n, what), mpi::datatype(dtype),
                       mpi::combineOp(options.reduceOp, dtype), options.rootRank, comm),
            what);
        if (root) finishReduce(options.reduceOp, dtype, tensor.data(), n, groupSize);
      });
}

std::shared_ptr<Work> MpiBackend::allgather(const std::vector<Tensor>& outputs, const Tensor& input,
                                            const AllgatherOptions& options) {
  checkCPU(input, "allgather");
  for (const Tensor& t : outputs) checkCPU(t, "allgather");
  MPI_Comm comm = comm_;
  return enqueue(
      "allgather", [=] { return input.describe(); }, options.timeout, outputs,
      [=] {
        auto what = [] { return std::string("allgather"); };
        Tensor flat =
            Tensor::empty({input.numel() * static_cast<int64_t>(outputs.size())}, input.dtype());
        int n = mpi::count(input.numel(), what);
        MPI_Datatype type = mpi::datatype(input.dtype());
        C10D_MPI_CHECK(MPI_Allgather(input.data(), n, type, flat.data(), n, type, comm), what);
        unpackTensors(flat, outputs);
      });
}

std::shared_ptr<Work> MpiBackend::allgatherIntoTensor(const Tensor& output, const Tensor& input,
                                                      const AllgatherOptions& options) {
  checkCPU(input, "allgather_into_tensor");
  checkCPU(output, "allgather_into_tensor");
  MPI_Comm comm = comm_;
  return enqueue(
      "allgather_into_tensor", [=] { return input.describe(); }, options.timeout, {output},
      [=] {
        auto what = [] { return std::string("allgather_into_tensor"); };
        int n = mpi::count(input.numel(), what);
        MPI_Datatype type = mpi::datatype(input.dtype());
        C10D_MPI_CHECK(MPI_Allgather(input.data(), n, type, output.data(), n, type, comm), what);
      });
}

std::shared_ptr<Work> MpiBackend::gather(const std::vector<Tensor>& outputs, const Tensor& input,
                                         const GatherOptions& options) {
  checkCPU(input, "gather");
  for (const Tensor& t : outputs) checkCPU(t, "gather");
  MPI_Comm comm = comm_;
  bool root = rank() == options.rootRank;
  int groupSize = size();
  return enqueue(
      "gather", [=] { return detail::concat(input.describe(), " root ", options.rootRank); },
      options.timeout, outputs,
      [=] {
        auto what = [] { return std::string("gather"); };
        int n = mpi::count(input.numel(), what);
        MPI_Datatype type = mpi::datatype(input.dtype());
        Tensor flat;
        if (root) flat = Tensor::empty({input.numel() * groupSize}, input.dtype());
        C10D_MPI_CHECK(MPI_Gather(input.data(), n, type, root ? flat.data() : nullptr, n, type,
                                  options.rootRank, comm),
                       what);
        if (root) unpackTensors(flat, outputs);
      });
}

std::shared_ptr<Work> MpiBackend::scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                          const ScatterOptions& options) {
  checkCPU(output, "scatter");
  for (const Tensor& t : inputs) checkCPU(t, "scatter");
  MPI_Comm comm = comm_;
  bool root = rank() == options.rootRank;
  return enqueue(
      "scatter", [=] { return detail::concat(output.describe(), " root ", options.rootRank); },
      options.timeout, {output},
      [=] {
        auto what = [] { return std::string("scatter"); };
        int n = mpi::count(output.numel(), what);
        MPI_Datatype type = mpi::datatype(output.dtype());
        Tensor flat;
        if (root) flat = packTensors(inputs, output.dtype());
        C10D_MPI_CHECK(MPI_Scatter(root ? flat.data() : nullptr, n, type, output.data(), n, type,
                                   options.rootRank, comm),
                       what);
      });
}

namespace {

// MPI_Reduce_scatter_block of flat (which it may scale for PREMUL_SUM) into output.
void reduceScatterFlat(const Tensor& output, const Tensor& flat, const ReduceOp& op, int groupSize,
                       MPI_Comm comm, const char* name) {
  auto what = [name] { return std::string(name); };
  ScalarType dtype = output.dtype();
  prepareReduce(op, dtype, flat.data(), flat.numel());
  C10D_MPI_CHECK(
      MPI_Reduce_scatter_block(flat.data(), output.data(), mpi::count(output.numel(), what),
                               mpi::datatype(dtype), mpi::combineOp(op, dtype), comm),
      what);
  finishReduce(op, dtype, output.data(), output.numel(), groupSize);
}

}  // namespace

std::shared_ptr<Work> MpiBackend::reduceScatter(const Tensor& output,
                                                const std::vector<Tensor>& inputs,
                                                const ReduceScatterOptions& options) {
  checkCPU(output, "reduce_scatter");
  for (const Tensor& t : inputs) checkCPU(t, "reduce_scatter");
  MPI_Comm comm = comm_;
  int groupSize = size();
  return enqueue(
      "reduce_scatter", [=] { return detail::concat(output.describe(), " ", options.reduceOp); },
      options.timeout, {output},
      [=] {
        Tensor flat = packTensors(inputs, output.dtype());
        reduceScatterFlat(output, flat, options.reduceOp, groupSize, comm, "reduce_scatter");
      });
}

std::shared_ptr<Work> MpiBackend::reduceScatterTensor(const Tensor& output, const Tensor& input,
                                                      const ReduceScatterOptions& options) {
  checkCPU(output, "reduce_scatter_tensor");
  checkCPU(input, "reduce_scatter_tensor");
  MPI_Comm comm = comm_;
  int groupSize = size();
  return enqueue(
      "reduce_scatter_tensor",
      [=] { return detail::concat(input.describe(), " ", options.reduceOp); }, options.timeout,
      {output},
      [=] {
        Tensor flat = input;
        if (options.reduceOp.kind() == ReduceOp::PREMUL_SUM) {
          // The input must stay as the caller gave it: scale a copy.
          flat = Tensor::empty({input.numel()}, input.dtype());
          copyBytes(flat.data(), input.data(), input.nbytes());
        }
        reduceScatterFlat(output, flat, options.reduceOp, groupSize, comm, "reduce_scatter_tensor");
      });
}

std::shared_ptr<Work> MpiBackend::alltoall(const std::vector<Tensor>& outputs,
                                           const std::vector<Tensor>& inputs,
                                           const AllToAllOptions& options) {
  for (const Tensor& t : outputs) checkCPU(t, "alltoall");
  for (const Tensor& t : inputs) checkCPU(t, "alltoall");
  MPI_Comm comm = comm_;
  int groupSize = size();
  return enqueue(
      "alltoall", [=] { return detail::concat(inputs.size(), " tensors"); }, options.timeout,
      outputs,
      [=] {
        auto what = [] { return std::string("alltoall"); };
        // Per-peer sizes may differ: alltoallv over packed buffers.
        std::vector<int> sendCounts(groupSize), sendOffsets(groupSize), recvCounts(groupSize),
            recvOffsets(groupSize);
        int64_t sendTotal = 0, recvTotal = 0;
        for (int r = 0; r < groupSize; ++r) {
          sendCounts[r] = mpi::count(static_cast<int64_t>(inputs[r].nbytes()), what);
          recvCounts[r] = mpi::count(static_cast<int64_t>(outputs[r].nbytes()), what);
          sendOffsets[r] = mpi::count(sendTotal, what);
          recvOffsets[r] = mpi::count(recvTotal, what);
          sendTotal += sendCounts[r];
          recvTotal += recvCounts[r];
        }
        Tensor sendFlat = packTensors(inputs, ScalarType::UInt8);
        Tensor recvFlat = Tensor::empty({recvTotal}, ScalarType::UInt8);
        C10D_MPI_CHECK(
            MPI_Alltoallv(sendFlat.data(), sendCounts.data(), sendOffsets.data(), MPI_BYTE,
                          recvFlat.data(), recvCounts.data(), recvOffsets.data(), MPI_BYTE, comm),
            what);
        unpackTensors(recvFlat, outputs);
      });
}

std::shared_ptr<Work> MpiBackend::alltoallBase(const Tensor& output, const Tensor& input,
                                               const std::vector<int64_t>& outputSplitSizes,
                                               const std::vector<int64_t>& inputSplitSizes,
                                               const AllToAllOptions& options) {
  checkCPU(output, "alltoall_base");
  checkCPU(input, "alltoall_base");
  MPI_Comm comm = comm_;
  int groupSize = size();
  return enqueue(
      "alltoall_base", [=] { return input.describe(); }, options.timeout, {output},
      [=] {
        auto what = [] { return std::string("alltoall_base"); };
        MPI_Datatype type = mpi::datatype(input.dtype());
        if (outputSplitSizes.empty() && inputSplitSizes.empty()) {
          int n = mpi::count(input.numel() / groupSize, what);
          C10D_MPI_CHECK(MPI_Alltoall(input.data(), n, type, output.data(), n, type, comm), what);
          return;
        }
        // Splits count rows of dim 0; MPI counts elements.
        auto layout = [&](const Tensor& t, const std::vector<int64_t>& splits,
                          std::vector<int>& counts, std::vector<int>& offsets) {
          int64_t row = t.dim() > 0 && t.sizes()[0] > 0 ? t.numel() / t.sizes()[0] : 0;
          int64_t offset = 0;
          for (int r = 0; r < groupSize; ++r) {
            int64_t rows = splits.empty() ? t.sizes()[0] / groupSize : splits[r];
            counts[r] = mpi::count(rows * row, what);
            offsets[r] = mpi::count(offset, what);
            offset += rows * row;
          }
        };
        std::vector<int> sendCounts(groupSize), sendOffsets(groupSize), recvCounts(groupSize),
            recvOffsets(groupSize);
        layout(input, inputSplitSizes, sendCounts, sendOffsets);
        layout(output, outputSplitSizes, recvCounts, recvOffsets);
        C10D_MPI_CHECK(
            MPI_Alltoallv(input.data(), sendCounts.data(), sendOffsets.data(), type, output.data(),
                          recvCounts.data(), recvOffsets.data(), type, comm),
            what);
      });
}

std::shared_ptr<Work> MpiBackend::barrier(const BarrierOptions& options) {
  MPI_Comm comm = comm_;
  return enqueue("barrier", nullptr, options.timeout, {}, [comm] {
    C10D_MPI_CHECK(MPI_Barrier(comm), [] { return std::string("barrier"); });
  });
}

// ---- point-to-point ----

std::shared_ptr<Work> MpiBackend::startP2P(bool isSend, const Tensor& tensor, int peer, int tag,
                                           std::chrono::milliseconds timeout) {
  const char* op = isSend ? "send" : (peer < 0 ? "recv_anysource" : "recv");
  checkCPU(tensor, op);
  checkNotShutDown(op);
  Work::Describe describe = describePointToPoint(op, tensor, isSend, peer, tag, groupName());
  C10D_CHECK(tag <= tagUpperBound_, InvalidArgument, describe(), ": MPI tags go from 0 to ",
             tagUpperBound_);
  auto what = [&] { return detail::concat(describe(), " on rank ", rank()); };
  int bytes = mpi::count(static_cast<int64_t>(tensor.nbytes()), what);
  auto work = std::make_shared<MpiP2PWork>(describe, timeout, tensor, !isSend, progress_);
  if (isSend) {
    C10D_MPI_CHECK(MPI_Isend(tensor.data(), bytes, MPI_BYTE, peer, tag, comm_, work->request()),
                   what);
  } else {
    C10D_MPI_CHECK(MPI_Irecv(tensor.data(), bytes, MPI_BYTE, peer < 0 ? MPI_ANY_SOURCE : peer, tag,
                             comm_, work->request()),
                   what);
  }
  progress_->track(work);
  return work;
}

// ---- a communicator handed in ----

std::shared_ptr<ProcessGroup> newMpiProcessGroup(MPI_Comm comm, ProcessGroupOptions options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  C10D_CHECK(initialized, BackendError,
             "newMpiProcessGroup: MPI is not initialised; call MPI_Init_thread first");
  mpi::ensureInitialized();  // checks the thread level
  auto where = [] { return std::string("newMpiProcessGroup"); };
  MPI_Comm dup = MPI_COMM_NULL;
  C10D_MPI_CHECK(MPI_Comm_dup(comm, &dup), where);
  auto owned = std::make_shared<mpi::Communicator>(dup);
  int rank = 0, size = 0;
  C10D_MPI_CHECK(MPI_Comm_rank(dup, &rank), where);
  C10D_MPI_CHECK(MPI_Comm_size(dup, &size), where);
  options.backend = "mpi";
  options.storeIsShared = false;
  return std::make_shared<ProcessGroup>(
      std::make_shared<HashStore>(), rank, size, std::move(options),
      std::map<std::string, std::shared_ptr<void>>{{"mpi", owned}});
}

}  // namespace c10d::inline v0

C10D_DEFINE_BACKEND_LIBRARY(c10d::MpiBackend)
