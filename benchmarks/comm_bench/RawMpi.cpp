// The raw MPI path: each op as an MPI program would write it, with one blocking MPI call on a
// duplicate of MPI_COMM_WORLD, on the calling thread (no queue, no Work, no progress thread).

// MPI's C API only: the deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdint>

#include "backends/mpi/MpiTypes.hpp"
#include "benchmarks/comm_bench/CommBench.hpp"
#include "c10d/core/Exception.hpp"

namespace commbench {
namespace {

void check(int code, const char* call) {
  c10d::mpi::check(code, call, [] { return std::string("raw MPI"); });
}

class RawMpiPath : public RawPath {
 public:
  explicit RawMpiPath(c10d::ProcessGroup& pg) {
    c10d::mpi::ensureInitialized();
    int rank = -1;
    int size = 0;
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
    C10D_CHECK(rank == pg.rank() && size == pg.size(), c10d::InvalidArgument,
               "--raw with the mpi backend compares against MPI_COMM_WORLD, but this is rank ",
               rank, " of ", size, " there and rank ", pg.rank(), " of ", pg.size(),
               " in the process group (start the job with mpirun)");
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  }
  ~RawMpiPath() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  std::string describe() const override {
    return "raw: the same op as one blocking MPI call on the calling thread (a duplicate of "
           "MPI_COMM_WORLD, no c10d layer)";
  }

  bool prepareOp(const OpInfo& op, const ReduceOp& redop, ScalarType dtype,
                 std::vector<std::string>& notes) override {
    if (!op.reduces) return true;
    ReduceOp::Kind kind = redop.kind();
    if (kind == ReduceOp::AVG || kind == ReduceOp::PREMUL_SUM) {
      notes.push_back("raw: MPI has no " + std::string(c10d::name(kind)) +
                      " (c10d builds it around a sum); no raw rows");
      return false;
    }
    if (dtype == ScalarType::Float16 || dtype == ScalarType::BFloat16 ||
        dtype == ScalarType::Bool) {
      notes.push_back("raw: MPI has no " + std::string(c10d::name(dtype)) +
                      " reduction; raw passes the user-defined MPI op c10d's MPI backend uses");
    }
    return true;
  }

  Runner runner(const Case& c) override {
    MPI_Comm comm = comm_;
    void* input = c.input.data();
    void* output = c.output.data();
    const int count = static_cast<int>(c.shape.count);
    const int root = c.root;
    const bool isRoot = c.rank == root;
    MPI_Datatype type = c10d::mpi::datatype(c.dtype);
    MPI_Op op = c.op.reduces ? c10d::mpi::combineOp(c.redop, c.dtype) : MPI_OP_NULL;
    switch (c.op.op) {
      case Op::Allreduce:
        return [=] {
          check(MPI_Allreduce(MPI_IN_PLACE, input, count, type, op, comm), "MPI_Allreduce");
        };
      case Op::Allgather:
        return [=] {
          check(MPI_Allgather(input, count, type, output, count, type, comm), "MPI_Allgather");
        };
      case Op::ReduceScatter:
        return [=] {
          check(MPI_Reduce_scatter_block(input, output, count, type, op, comm),
                "MPI_Reduce_scatter_block");
        };
      case Op::Broadcast:
        return [=] { check(MPI_Bcast(input, count, type, root, comm), "MPI_Bcast"); };
      case Op::Reduce:
        return [=] {
          check(MPI_Reduce(isRoot ? MPI_IN_PLACE : input, isRoot ? input : nullptr, count, type, op,
                           root, comm),
                "MPI_Reduce");
        };
      case Op::Alltoall:
        return [=] {
          check(MPI_Alltoall(input, count, type, output, count, type, comm), "MPI_Alltoall");
        };
      case Op::SendRecv: {
        const int to = (c.rank + 1) % c.ranks;
        const int from = (c.rank - 1 + c.ranks) % c.ranks;
        return [=] {
          MPI_Request requests[2];
          check(MPI_Irecv(output, count, type, from, 0, comm, &requests[0]), "MPI_Irecv");
          check(MPI_Isend(input, count, type, to, 0, comm, &requests[1]), "MPI_Isend");
          check(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE), "MPI_Waitall");
        };
      }
      case Op::Barrier:
        return [=] { check(MPI_Barrier(comm), "MPI_Barrier"); };
    }
    return {};
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace

std::unique_ptr<RawPath> connectRawMpi(c10d::ProcessGroup& pg) {
  return std::make_unique<RawMpiPath>(pg);
}

}  // namespace commbench
