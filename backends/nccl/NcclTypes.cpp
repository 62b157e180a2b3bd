#include "backends/nccl/NcclTypes.hpp"

#include <cstring>
#include <type_traits>

#include "backends/common/Dispatch.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Half.hpp"

namespace c10d::inline v1::nccl {

void check(ncclResult_t status, const char* call, ncclComm_t comm,
           const std::function<std::string()>& what) {
  if (status == ncclSuccess) return;
  const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  C10D_THROW(BackendError, what(), ": ", call, " failed: ", ncclGetErrorString(status),
             last != nullptr && *last != '\0' ? std::string(" (") + last + ")" : std::string());
}

GroupGuard::GroupGuard(ncclComm_t comm, const std::function<std::string()>& what)
    : comm_(comm), what_(what) {
  check(ncclGroupStart(), "ncclGroupStart", comm_, what_);
  open_ = true;
}

GroupGuard::~GroupGuard() {
  if (open_) ncclGroupEnd();
}

void GroupGuard::end() {
  open_ = false;
  check(ncclGroupEnd(), "ncclGroupEnd", comm_, what_);
}

ncclDataType_t dataType(ScalarType dtype, const char* op) {
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

void checkReducible(const char* op, ScalarType dtype, const ReduceOp& reduceOp) {
  dataType(dtype, op);
  ReduceOp::Kind kind = reduceOp.kind();
  bool boolAsLogical = dtype == ScalarType::Bool && kind != ReduceOp::BXOR;
  C10D_CHECK(
      boolAsLogical || (kind != ReduceOp::BAND && kind != ReduceOp::BOR && kind != ReduceOp::BXOR),
      BackendError, "backend nccl does not support ", op, " with ", reduceOp,
      " (NCCL has no bitwise reductions)");
}

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
      ncclDataType_t type = dataType(dtype, name);
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

}  // namespace c10d::inline v1::nccl
