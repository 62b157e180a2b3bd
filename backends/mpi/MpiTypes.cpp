#include "backends/mpi/MpiTypes.hpp"

#include <array>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>

#include "backends/common/Reduce.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::mpi {

namespace {

const char* threadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "MPI_THREAD_MULTIPLE";
  }
}

void finalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// MPI user functions get no context pointer, so each (op, dtype) pair is its own function.
template <ReduceOp::Kind K, ScalarType D>
void combine(void* in, void* inout, int* len, MPI_Datatype*) {
  static const ReduceFunction fn = reduceFunction(ReduceOp(K), D);
  fn(inout, inout, in, static_cast<size_t>(*len));
}

template <ScalarType D>
MPI_User_function* combineFor(ReduceOp::Kind kind) {
  switch (kind) {
    case ReduceOp::PRODUCT:
      return &combine<ReduceOp::PRODUCT, D>;
    case ReduceOp::MIN:
      return &combine<ReduceOp::MIN, D>;
    case ReduceOp::MAX:
      return &combine<ReduceOp::MAX, D>;
    case ReduceOp::BAND:
      return &combine<ReduceOp::BAND, D>;
    case ReduceOp::BOR:
      return &combine<ReduceOp::BOR, D>;
    case ReduceOp::BXOR:
      return &combine<ReduceOp::BXOR, D>;
    default:  // SUM, and AVG / PREMUL_SUM, which combine by summing
      return &combine<ReduceOp::SUM, D>;
  }
}

MPI_Op userOp(ReduceOp::Kind kind, ScalarType dtype) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, MPI_Op> ops;
  std::lock_guard<std::mutex> guard(mutex);
  auto key = std::make_pair(static_cast<int>(kind), static_cast<int>(dtype));
  auto it = ops.find(key);
  if (it != ops.end()) return it->second;
  MPI_User_function* fn = dtype == ScalarType::Float16    ? combineFor<ScalarType::Float16>(kind)
                          : dtype == ScalarType::BFloat16 ? combineFor<ScalarType::BFloat16>(kind)
                                                          : combineFor<ScalarType::Bool>(kind);
  MPI_Op op = MPI_OP_NULL;
  C10D_MPI_CHECK(MPI_Op_create(fn, /*commute=*/1, &op),
                 [&] { return detail::concat("mpi backend: user op for ", dtype); });
  ops.emplace(key, op);
  return op;
}

}  // namespace

void ensureInitialized() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> guard(mutex);
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    C10D_CHECK(!finalized, BackendError,
               "mpi backend: MPI was already finalized in this process; it cannot start again");
    C10D_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided),
                   [] { return std::string("mpi backend"); });
    std::atexit(finalizeAtExit);
  } else {
    MPI_Query_thread(&provided);
  }
  C10D_CHECK(provided >= MPI_THREAD_MULTIPLE, BackendError, "mpi backend: MPI ",
             initialized ? "was initialised by the program with " : "only provides ",
             threadLevelName(provided),
             "; the backend needs MPI_THREAD_MULTIPLE (collectives run on its own thread, "
             "point-to-point on the caller's). ",
             initialized ? "Initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)."
                         : "Use an MPI library built with thread support.");
}

void failed(int code, const char* call, const std::string& what) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  C10D_THROW(BackendError, what, ": ", call, " failed: ",
             length > 0 ? std::string(text, length) : "MPI error " + std::to_string(code));
}

MPI_Datatype datatype(ScalarType dtype) {
  switch (dtype) {
#define C10D_MPI_TYPE(name, type, bytes, text, kind, dlpack, mpi, ...) \
  case ScalarType::name:                                               \
    return mpi;
    C10D_FORALL_SCALAR_TYPES(C10D_MPI_TYPE)
#undef C10D_MPI_TYPE
  }
  C10D_THROW(InvalidArgument, "mpi backend: no MPI datatype for dtype ", static_cast<int>(dtype));
}

MPI_Op combineOp(const ReduceOp& op, ScalarType dtype) {
  if (dtype == ScalarType::Float16 || dtype == ScalarType::BFloat16 || dtype == ScalarType::Bool) {
    return userOp(op.kind(), dtype);
  }
  switch (op.kind()) {
    case ReduceOp::PRODUCT:
      return MPI_PROD;
    case ReduceOp::MIN:
      return MPI_MIN;
    case ReduceOp::MAX:
      return MPI_MAX;
    case ReduceOp::BAND:
      return MPI_BAND;
    case ReduceOp::BOR:
      return MPI_BOR;
    case ReduceOp::BXOR:
      return MPI_BXOR;
    default:
      return MPI_SUM;
  }
}

void countTooLarge(int64_t n, const std::string& what) {
  C10D_THROW(InvalidArgument, what, ": ", n, " elements do not fit in an MPI count (at most ",
             std::numeric_limits<int>::max(), ")");
}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm != MPI_COMM_NULL && comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
}

}  // namespace c10d::inline v1::mpi
