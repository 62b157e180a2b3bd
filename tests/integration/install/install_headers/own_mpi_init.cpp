// A program that initialises MPI itself and gives c10d its communicator, built against the
// installed package and run under mpirun: the group's rank and size are MPI's, its allreduce and
// broadcast are right, and the program's own MPI traffic on MPI_COMM_WORLD does not mix with it.
#include <mpi.h>

#include <backends/mpi/MpiBackend.hpp>
#include <c10d/ProcessGroup.hpp>
#include <c10d/core/Tensor.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int failures = 0;
  {
    auto group = c10d::newMpiProcessGroup(MPI_COMM_WORLD);
    if (group->rank() != rank || group->size() != size) {
      std::fprintf(stderr, "rank %d: group says rank %d of %d, MPI %d of %d\n", rank, group->rank(),
                   group->size(), rank, size);
      ++failures;
    }
    c10d::Tensor t = c10d::Tensor::empty({3}, c10d::ScalarType::Int64);
    for (int i = 0; i < 3; ++i) t.data<int64_t>()[i] = rank + i;
    group->allreduce(t)->wait();
    for (int i = 0; i < 3; ++i) {
      const int64_t want = int64_t{size} * (size - 1) / 2 + int64_t{size} * i;
      if (t.data<int64_t>()[i] != want) {
        std::fprintf(stderr, "rank %d: allreduce element %d is %lld, want %lld\n", rank, i,
                     static_cast<long long>(t.data<int64_t>()[i]), static_cast<long long>(want));
        ++failures;
      }
    }
    // The program's own message on MPI_COMM_WORLD, between two of the group's ops.
    int token = rank == 0 ? 42 : 0;
    MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD);
    c10d::Tensor b = c10d::Tensor::empty({1}, c10d::ScalarType::Int32);
    b.data<int32_t>()[0] = rank == size - 1 ? 7 : -1;
    group->broadcast(b, {.rootRank = size - 1})->wait();
    if (token != 42 || b.data<int32_t>()[0] != 7) {
      std::fprintf(stderr, "rank %d: MPI_Bcast gave %d (want 42), broadcast %d (want 7)\n", rank,
                   token, b.data<int32_t>()[0]);
      ++failures;
    }
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("own_mpi_init: %d ranks, %d failures\n", size, all);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
