#pragma once

// Private to backends/nccl: status checks of NCCL calls, and how c10d's dtypes and reduce ops map
// onto NCCL's. No state of its own: any thread may call these; a PREMUL_SUM reduction is made on
// a communicator, so it is made and destroyed wherever that communicator's calls are serialized.

#include <nccl.h>

#include <functional>
#include <string>

#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v1::nccl {

// Throws BackendError "<what()>: <call> failed: <NCCL's message> (<comm's last error>)" unless
// status is ncclSuccess. comm may be null (no communicator yet): the message then has no detail.
void check(ncclResult_t status, const char* call, ncclComm_t comm,
           const std::function<std::string()>& what);

// One NCCL group call: ncclGroupStart now, ncclGroupEnd at end(). NCCL counts open groups per
// thread, so one left open by a throw between the two would make every later NCCL call of this
// thread a deferred part of it; the destructor ends a group that end() did not (its status is
// dropped: the error in flight is the one to report).
class GroupGuard {
 public:
  GroupGuard(ncclComm_t comm, const std::function<std::string()>& what);
  ~GroupGuard();
  GroupGuard(const GroupGuard&) = delete;
  GroupGuard& operator=(const GroupGuard&) = delete;
  // Ends the group, launching its calls; throws BackendError as check() does.
  void end();

 private:
  ncclComm_t comm_;
  const std::function<std::string()>& what_;
  bool open_ = false;
};

// NCCL's type for dtype's elements; throws BackendError naming op when NCCL has none (int16).
ncclDataType_t dataType(ScalarType dtype, const char* op);

// What NCCL cannot reduce, refused before any device work (and without a device): int16 (NCCL
// has no 16-bit integer type; ops that only move data send it as bytes) and the bitwise ops.
void checkReducible(const char* op, ScalarType dtype, const ReduceOp& reduceOp);

// A reduction op for NCCL; PREMUL_SUM's is created per op and destroyed after enqueueing.
struct Reduction {
  ncclRedOp_t op = ncclSum;
  bool created = false;
};

// NCCL's op for op on dtype (bool as 0/1 bytes). op is defined on dtype (ProcessGroup checked
// it); NCCL may still lack it. A PREMUL_SUM op is created on comm (created is then true: the
// caller destroys it with ncclRedOpDestroy once the call that uses it is enqueued). name is the
// c10d op, for errors.
Reduction reduction(const ReduceOp& op, ScalarType dtype, ncclComm_t comm, const char* name);

}  // namespace c10d::inline v1::nccl

#define C10D_NCCL(call, comm, what) ::c10d::nccl::check((call), #call, comm, what)
