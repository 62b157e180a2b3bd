#pragma once

// Private to backends/mpi: MPI initialisation, status checks, and how c10d's dtypes and reduce
// ops map onto MPI's.

// MPI's C API only: Open MPI's deprecated C++ bindings would need libmpi_cxx at link time.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v1::mpi {

// Initialises MPI with MPI_THREAD_MULTIPLE (finalised at exit) unless the program did; throws
// BackendError when MPI was initialised with a lower thread level, or is already finalised.
void ensureInitialized();

[[noreturn]] void failed(int code, const char* call, const std::string& what);
[[noreturn]] void countTooLarge(int64_t n, const std::string& what);

// Throws BackendError "<what()>: <call> failed: <MPI's message>" unless code is MPI_SUCCESS.
// what is called only then (every op passes here).
template <typename What>
void check(int code, const char* call, What&& what) {
  if (code != MPI_SUCCESS) failed(code, call, std::string(what()));
}

// The datatype that moves dtype's elements (float16 and bfloat16 as 16-bit words).
MPI_Datatype datatype(ScalarType dtype);

// The op that combines two ranks' dtype values for op: MPI's own where it means the same thing,
// else a user op over c10d's kernels (float16, bfloat16, bool). AVG and PREMUL_SUM combine by
// summing around prepareReduce/finishReduce, as in every backend. op must be defined on dtype
// (ProcessGroup checked it).
MPI_Op combineOp(const ReduceOp& op, ScalarType dtype);

// n as an MPI count; throws InvalidArgument naming what() when it does not fit in an int.
template <typename What>
int count(int64_t n, What&& what) {
  if (n < 0 || n > std::numeric_limits<int>::max()) countTooLarge(n, std::string(what()));
  return static_cast<int>(n);
}

// An owned communicator, freed once nobody holds it (MPI_Comm_free while MPI is still up).
struct Communicator {
  MPI_Comm comm = MPI_COMM_NULL;
  explicit Communicator(MPI_Comm c) : comm(c) {}
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
};

}  // namespace c10d::inline v1::mpi

#define C10D_MPI_CHECK(call, what) ::c10d::mpi::check((call), #call, what)
