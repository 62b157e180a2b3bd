#pragma once

// What the parts of c10d-comm-bench share: the ops it measures, one size's case, and the
// interface of a "raw" path (the same op made straight on the backend's own library, without
// the c10d layer), implemented per library beside this file.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"
#include "c10d/core/Tensor.hpp"

namespace commbench {

using c10d::ReduceOp;
using c10d::ScalarType;
using c10d::Tensor;

// ---- operations ----

enum class Op {
  Allreduce,
  Allgather,
  ReduceScatter,
  Broadcast,
  Reduce,
  Alltoall,
  SendRecv,
  Barrier
};

struct OpInfo {
  Op op;
  const char* name;
  bool reduces;  // takes the reduce op
  bool rooted;   // takes the root
};

inline constexpr OpInfo kOps[] = {
    {Op::Allreduce, "allreduce", true, false},
    {Op::Allgather, "allgather", false, false},
    {Op::ReduceScatter, "reduce_scatter", true, false},
    {Op::Broadcast, "broadcast", false, true},
    {Op::Reduce, "reduce", true, true},
    {Op::Alltoall, "alltoall", false, false},
    {Op::SendRecv, "sendrecv", false, false},
    // Moves no data: one row (size 0), whatever -b and -e say.
    {Op::Barrier, "barrier", false, false},
};

// Element counts of one size: `count` is what the table prints (per rank for the ops that split
// a buffer among ranks), input/output what the buffers hold. In-place ops have output == 0.
struct Shape {
  int64_t bytes = 0;  // the size column: count rounded to whole elements (and ranks)
  int64_t count = 0;
  int64_t inputCount = 0;
  int64_t outputCount = 0;
};

// One op at one size on this rank.
struct Case {
  const OpInfo& op;
  Shape shape;
  ScalarType dtype;
  ReduceOp redop;
  int root;
  int rank;
  int ranks;
  Tensor input;       // views of this size, on the benchmark's device
  Tensor output;      // == input for in-place ops
  Tensor hostInput;   // host memory the checks fill and read: input itself on the CPU
  Tensor hostOutput;  // likewise for output
  void* scratch;      // raw Gloo reduce_scatter's full-size buffer (CPU only)
  std::chrono::milliseconds timeout = c10d::kDefaultTimeout;  // each c10d op's own
};

// One blocking operation, timed as a whole.
using Runner = std::function<void()>;

// The same ops made straight on a communication library (CPU tensors only).
class RawPath {
 public:
  virtual ~RawPath() = default;
  // For the preamble: "raw: the same op straight on ...".
  virtual std::string describe() const = 0;
  // Whether this path has op with redop on dtype; notes (printed above the op's rows) say where
  // it differs from the c10d path or why it has no rows.
  virtual bool prepareOp(const OpInfo& op, const ReduceOp& redop, ScalarType dtype,
                         std::vector<std::string>& notes) = 0;
  // Whether runner() needs Case::scratch for op.
  virtual bool needsScratch(Op) const { return false; }
  // The op at c's size; called after prepareOp() accepted c's op.
  virtual Runner runner(const Case& c) = 0;
};

// The raw path for the backend serving the group's CPU tensors ("gloo", "mpi"); throws
// c10d::InvalidArgument naming the backend when this build has none for it.
std::unique_ptr<RawPath> connectRawPath(c10d::ProcessGroup& pg);

#if C10D_WITH_GLOO
std::unique_ptr<RawPath> connectRawGloo(c10d::ProcessGroup& pg);
#endif
#if C10D_WITH_MPI
std::unique_ptr<RawPath> connectRawMpi(c10d::ProcessGroup& pg);
#endif

}  // namespace commbench
