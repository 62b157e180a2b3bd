// The MPI backend: each collective is one MPI call on the backend's communicator, run through
// the op queue (issue order, caller's thread when it waits at once); point-to-point ops are
// MPI requests (MpiProgress.cpp).

#include "backends/mpi/MpiBackendImpl.hpp"

#include <algorithm>
#include <cstring>

#include "backends/common/Flatten.hpp"
#include "backends/common/OpQueue.hpp"
#include "backends/common/Reduce.hpp"
#include "backends/mpi/MpiProgress.hpp"
#include "backends/mpi/MpiTypes.hpp"
#include "c10d/BackendLibrary.hpp"
#include "c10d/WorkPool.hpp"
#include "c10d/core/Exception.hpp"
#include "store/HashStore.hpp"

namespace c10d::inline v1 {

MpiBackend::MpiBackend(const BackendContext& context)
    : QueuedBackend("mpi", context), pool_(std::make_shared<detail::WorkPool<MpiWork>>()) {
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
  pool_->close();
}

void MpiBackend::stopAfterQueue() {
  progress_->stop();
}

// What a collective runs with: the communicator, this group's size and this rank.
struct MpiComm {
  MPI_Comm comm;
  int size;
  int rank;
};

namespace {

using Comm = MpiComm;

auto named(const Op& op) {
  return [&op] { return std::string(name(op.type)); };
}

void allreduceInPlace(const Comm& c, const Op& op, const Tensor& tensor) {
  ScalarType dtype = tensor.dtype();
  size_t n = tensor.numel();
  prepareReduce(op.reduceOp, dtype, tensor.data(), n);
  C10D_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, tensor.data(), mpi::count(n, named(op)),
                               mpi::datatype(dtype), mpi::combineOp(op.reduceOp, dtype), c.comm),
                 named(op));
  finishReduce(op.reduceOp, dtype, tensor.data(), n, c.size);
}

void broadcast(const Comm& c, const Op& op, const OpTensors& t) {
  const Tensor& tensor = *t.input;
  C10D_MPI_CHECK(MPI_Bcast(tensor.data(), mpi::count(tensor.numel(), named(op)),
                           mpi::datatype(tensor.dtype()), op.root, c.comm),
                 named(op));
}

void allreduce(const Comm& c, const Op& op, const OpTensors& t) {
  allreduceInPlace(c, op, *t.input);
}

void allreduceCoalesced(const Comm& c, const Op& op, const OpTensors& t) {
  for (const Tensor& tensor : *t.inputs) allreduceInPlace(c, op, tensor);
}

void reduce(const Comm& c, const Op& op, const OpTensors& t) {
  const Tensor& tensor = *t.input;
  const bool root = c.rank == op.root;
  ScalarType dtype = tensor.dtype();
  size_t n = tensor.numel();
  prepareReduce(op.reduceOp, dtype, tensor.data(), n);
  C10D_MPI_CHECK(MPI_Reduce(root ? MPI_IN_PLACE : tensor.data(), root ? tensor.data() : nullptr,
                            mpi::count(n, named(op)), mpi::datatype(dtype),
                            mpi::combineOp(op.reduceOp, dtype), op.root, c.comm),
                 named(op));
  if (root) finishReduce(op.reduceOp, dtype, tensor.data(), n, c.size);
}

void allgather(const Comm& c, const Op& op, const OpTensors& t) {
  const Tensor& input = *t.input;
  const std::vector<Tensor>& outputs = *t.outputs;
  Tensor flat =
      Tensor::empty({input.numel() * static_cast<int64_t>(outputs.size())}, input.dtype());
  int n = mpi::count(input.numel(), named(op));
  MPI_Datatype type = mpi::datatype(input.dtype());
  C10D_MPI_CHECK(MPI_Allgather(input.data(), n, type, flat.data(), n, type, c.comm), named(op));
  unpackTensors(flat, outputs);
}

void allgatherIntoTensor(const Comm& c, const Op& op, const OpTensors& t) {
  const Tensor& input = *t.input;
  int n = mpi::count(input.numel(), named(op));
  MPI_Datatype type = mpi::datatype(input.dtype());
  C10D_MPI_CHECK(MPI_Allgather(input.data(), n, type, t.output->data(), n, type, c.comm),
                 named(op));
}

void gather(const Comm& c, const Op& op, const OpTensors& t) {
  const Tensor& input = *t.input;
  const bool root = c.rank == op.root;
  int n = mpi::count(input.numel(), named(op));
  MPI_Datatype type = mpi::datatype(input.dtype());
  Tensor flat;
  if (root) flat = Tensor::empty({input.numel() * c.size}, input.dtype());
  C10D_MPI_CHECK(
      MPI_Gather(input.data(), n, type, root ? flat.data() : nullptr, n, type, op.root, c.comm),
      named(op));
  if (root) unpackTensors(flat, *t.outputs);
}

void scatter(const Comm& c, const Op& op, const OpTensors& t) {
  const Tensor& output = *t.output;
  const bool root = c.rank == op.root;
  int n = mpi::count(output.numel(), named(op));
  MPI_Datatype type = mpi::datatype(output.dtype());
  Tensor flat;
  if (root) flat = packTensors(*t.inputs, output.dtype());
  C10D_MPI_CHECK(
      MPI_Scatter(root ? flat.data() : nullptr, n, type, output.data(), n, type, op.root, c.comm),
      named(op));
}

// MPI_Reduce_scatter_block of flat (which it may scale for PREMUL_SUM) into output.
void reduceScatterFlat(const Comm& c, const Op& op, const Tensor& output, const Tensor& flat) {
  ScalarType dtype = output.dtype();
  prepareReduce(op.reduceOp, dtype, flat.data(), flat.numel());
  C10D_MPI_CHECK(
      MPI_Reduce_scatter_block(flat.data(), output.data(), mpi::count(output.numel(), named(op)),
                               mpi::datatype(dtype), mpi::combineOp(op.reduceOp, dtype), c.comm),
      named(op));
  finishReduce(op.reduceOp, dtype, output.data(), output.numel(), c.size);
}

void reduceScatter(const Comm& c, const Op& op, const OpTensors& t) {
  reduceScatterFlat(c, op, *t.output, packTensors(*t.inputs, t.output->dtype()));
}

void reduceScatterTensor(const Comm& c, const Op& op, const OpTensors& t) {
  const Tensor& input = *t.input;
  Tensor flat = input;
  if (op.reduceOp.kind() == ReduceOp::PREMUL_SUM) {
    // The input must stay as the caller gave it: scale a copy.
    flat = Tensor::empty({input.numel()}, input.dtype());
    copyBytes(flat.data(), input.data(), input.nbytes());
  }
  reduceScatterFlat(c, op, *t.output, flat);
}

void alltoall(const Comm& c, const Op& op, const OpTensors& t) {
  const std::vector<Tensor>& inputs = *t.inputs;
  const std::vector<Tensor>& outputs = *t.outputs;
  // Per-peer sizes may differ: alltoallv over packed buffers.
  std::vector<int> sendCounts(c.size), sendOffsets(c.size), recvCounts(c.size), recvOffsets(c.size);
  int64_t sendTotal = 0, recvTotal = 0;
  for (int r = 0; r < c.size; ++r) {
    sendCounts[r] = mpi::count(static_cast<int64_t>(inputs[r].nbytes()), named(op));
    recvCounts[r] = mpi::count(static_cast<int64_t>(outputs[r].nbytes()), named(op));
    sendOffsets[r] = mpi::count(sendTotal, named(op));
    recvOffsets[r] = mpi::count(recvTotal, named(op));
    sendTotal += sendCounts[r];
    recvTotal += recvCounts[r];
  }
  Tensor sendFlat = packTensors(inputs, ScalarType::UInt8);
  Tensor recvFlat = Tensor::empty({recvTotal}, ScalarType::UInt8);
  C10D_MPI_CHECK(
      MPI_Alltoallv(sendFlat.data(), sendCounts.data(), sendOffsets.data(), MPI_BYTE,
                    recvFlat.data(), recvCounts.data(), recvOffsets.data(), MPI_BYTE, c.comm),
      named(op));
  unpackTensors(recvFlat, outputs);
}

void alltoallBase(const Comm& c, const Op& op, const OpTensors& t) {
  const Tensor& input = *t.input;
  const Tensor& output = *t.output;
  const std::vector<int64_t>& inputSplits = *t.inputSplits;
  const std::vector<int64_t>& outputSplits = *t.outputSplits;
  MPI_Datatype type = mpi::datatype(input.dtype());
  if (outputSplits.empty() && inputSplits.empty()) {
    int n = mpi::count(input.numel() / c.size, named(op));
    C10D_MPI_CHECK(MPI_Alltoall(input.data(), n, type, output.data(), n, type, c.comm), named(op));
    return;
  }
  // Splits count rows of dim 0; MPI counts elements.
  auto layout = [&](const Tensor& tensor, const std::vector<int64_t>& splits,
                    std::vector<int>& counts, std::vector<int>& offsets) {
    int64_t row =
        tensor.dim() > 0 && tensor.sizes()[0] > 0 ? tensor.numel() / tensor.sizes()[0] : 0;
    int64_t offset = 0;
    for (int r = 0; r < c.size; ++r) {
      int64_t rows = splits.empty() ? tensor.sizes()[0] / c.size : splits[r];
      counts[r] = mpi::count(rows * row, named(op));
      offsets[r] = mpi::count(offset, named(op));
      offset += rows * row;
    }
  };
  std::vector<int> sendCounts(c.size), sendOffsets(c.size), recvCounts(c.size), recvOffsets(c.size);
  layout(input, inputSplits, sendCounts, sendOffsets);
  layout(output, outputSplits, recvCounts, recvOffsets);
  C10D_MPI_CHECK(MPI_Alltoallv(input.data(), sendCounts.data(), sendOffsets.data(), type,
                               output.data(), recvCounts.data(), recvOffsets.data(), type, c.comm),
                 named(op));
}

void barrier(const Comm& c, const Op& op, const OpTensors&) {
  C10D_MPI_CHECK(MPI_Barrier(c.comm), named(op));
}

// Each collective's function, by OpType.
constexpr void (*kRun[])(const Comm&, const Op&, const OpTensors&) = {
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
};
static_assert(std::size(kRun) == static_cast<size_t>(OpType::Barrier) + 1);

// MPI_Comm_split, run in issue order with the collectives (MPI needs the same order on every
// rank). A barrier-typed op of no number of its own: it is not recorded.
class SplitWork final : public QueuedWork {
 public:
  SplitWork(const Op& op, MPI_Comm parent, int color, int key)
      : QueuedWork(op, nullptr, {}), parent_(parent), color_(color), key_(key) {}
  MPI_Comm result = MPI_COMM_NULL;

 private:
  void run() override {
    C10D_MPI_CHECK(MPI_Comm_split(parent_, color_, key_, &result),
                   [] { return std::string("communicator split"); });
  }
  MPI_Comm parent_;
  int color_;
  int key_;
};

}  // namespace

// A collective of the MPI backend: one MPI call, watched by the progress thread for its timeout.
class MpiWork final : public QueuedWork {
 public:
  // Pooled by the backend (c10d/WorkPool.hpp): made once, rebound to each op it runs.
  MpiWork(std::shared_ptr<detail::GroupTrace> trace, MpiComm comm, MpiBackend::Progress* progress)
      : QueuedWork(std::move(trace)), comm_(comm), progress_(progress) {}

 private:
  void run() override {
    const Op& call = op();
    MpiBackend::Progress::RunningCollective running(*progress_, call);
    try {
      kRun[static_cast<size_t>(call.type)](comm_, call, tensors());
    } catch (const BackendError& e) {
      C10D_THROW(BackendError, description(), " on rank ", comm_.rank, ": ", e.what());
    }
  }
  MpiComm comm_;
  // The backend's: its shutdown closes the queue (failing what has not run) before it stops.
  MpiBackend::Progress* progress_;
};

std::shared_ptr<QueuedWork> MpiBackend::makeCollective(const Op& op, const OpTensors& tensors) {
  std::shared_ptr<MpiWork> work = detail::WorkPool<MpiWork>::acquire(pool_, op, [&] {
    return new MpiWork(trace(), MpiComm{comm_, size(), rank()}, progress_.get());
  });
  work->capture(tensors);
  return work;
}

std::shared_ptr<void> MpiBackend::splitForSubgroup(const std::vector<int>& ranksInParent) {
  auto position = std::find(ranksInParent.begin(), ranksInParent.end(), rank());
  bool member = position != ranksInParent.end();
  // Disjoint subgroups of one split differ in their lowest rank, which makes a color.
  int color =
      member ? *std::min_element(ranksInParent.begin(), ranksInParent.end()) : MPI_UNDEFINED;
  int key = member ? static_cast<int>(position - ranksInParent.begin()) : 0;
  Op op;
  op.timeout = std::chrono::hours(24);
  op.flags = Op::kStaged;
  auto split = std::make_shared<SplitWork>(op, comm_, color, key);
  checkNotShutDown(op);
  enqueueInternal(split);
  split->wait();
  if (split->result == MPI_COMM_NULL) return nullptr;
  return std::make_shared<mpi::Communicator>(split->result);
}

// ---- point-to-point ----

std::shared_ptr<Work> MpiBackend::startP2P(const Op& op, const Tensor& tensor) {
  checkNotShutDown(op);
  C10D_CHECK(op.tag <= tagUpperBound_, InvalidArgument, describe(op), " (group '", groupName(),
             "'): MPI tags go from 0 to ", tagUpperBound_);
  auto what = [&] { return detail::concat(describe(op), " on rank ", rank()); };
  int bytes = mpi::count(static_cast<int64_t>(tensor.nbytes()), what);
  auto work = std::make_shared<MpiP2PWork>(op, trace(), tensor, progress_);
  if (op.type == OpType::Send) {
    C10D_MPI_CHECK(
        MPI_Isend(tensor.data(), bytes, MPI_BYTE, op.peer, op.tag, comm_, work->request()), what);
  } else {
    C10D_MPI_CHECK(MPI_Irecv(tensor.data(), bytes, MPI_BYTE, op.peer < 0 ? MPI_ANY_SOURCE : op.peer,
                             op.tag, comm_, work->request()),
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

}  // namespace c10d::inline v1

C10D_DEFINE_BACKEND_LIBRARY(c10d::MpiBackend)
