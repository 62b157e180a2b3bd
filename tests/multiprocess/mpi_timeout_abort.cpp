// Rank 0 starts an allreduce that the other ranks never join. MPI cannot abandon a collective,
// so the mpi backend must end the job once the op's timeout passes instead of hanging:
// tests/multiprocess/mpi_timeout_abort.sh checks that mpirun fails soon, with the op named in the
// log.
#include <chrono>
#include <cstdio>
#include <thread>

#include "c10d/Init.hpp"

int main() {
  c10d::InitOptions options;
  options.backend = "mpi";
  options.timeout = std::chrono::seconds(1);
  auto pg = c10d::initProcessGroup(options);
  c10d::Tensor t = c10d::Tensor::zeros({16}, c10d::ScalarType::Float32);
  if (pg->rank() == 0) {
    pg->allreduce(t)->wait();
    std::puts("allreduce returned: the backend let a lone collective complete");
    return 0;
  }
  std::this_thread::sleep_for(std::chrono::seconds(30));
  std::puts("rank outlived the timeout by 29 s: the job was not ended");
  return 0;
}
