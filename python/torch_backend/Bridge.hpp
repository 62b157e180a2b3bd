#pragma once

// The seam between torch's c10d and ours. PyTorch's headers declare a namespace c10d of their own
// (ProcessGroup, Work, Store, ReduceOp...), and the two cannot meet in one translation unit, so
// the backend is two halves that share only this header: standard-library types and nothing else.
//
//   TorchProcessGroup.cpp  sees torch: at::Tensor -> TensorRef, torch's Store -> StoreFunctions,
//                          Op -> a torch Work with its Future.
//   Group.cpp              sees ours:  TensorRef -> c10d::Tensor, StoreFunctions -> c10d::Store,
//                          each call -> c10d::ProcessGroup.
//
// Errors: the calls below throw our c10d::Error types (as std::runtime_error to the torch half,
// which hands them to Python unchanged); StoreFunctions throw StoreTimeout on a timeout and
// anything else on other failures.

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace torch_bridge {

// Element types both sides know, in no particular order (each side maps its own enum).
enum class DType : uint8_t {
  Float32,
  Float64,
  Float16,
  BFloat16,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  Bool
};

// A tensor's memory as the torch half lends it: keepAlive holds the at::Tensor until every op
// that uses it has ended.
struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int cudaDevice = -1;  // -1: CPU
  std::shared_ptr<void> keepAlive;
};

enum class Reduce : uint8_t { Sum, Avg, Product, Min, Max, Band, Bor, Bxor, PremulSum };
struct ReduceSpec {
  Reduce kind = Reduce::Sum;
  double factor = 1.0;  // PremulSum only
};

// -1: the group's timeout (torch's kUnsetTimeout and our kDefaultTimeout are both -1).
using Timeout = std::chrono::milliseconds;

// What a torch Store does, as functions (the torch half binds them to one store).
struct StoreFunctions {
  std::function<void(const std::string&, const std::vector<uint8_t>&)> set;
  // Blocks up to the torch store's own timeout (the timeout below).
  std::function<std::vector<uint8_t>(const std::string&)> get;
  std::function<int64_t(const std::string&, int64_t)> add;
  std::function<std::vector<uint8_t>(const std::string&, const std::vector<uint8_t>&,
                                     const std::vector<uint8_t>&)>
      compareSet;
  std::function<bool(const std::string&)> deleteKey;
  std::function<bool(const std::vector<std::string>&)> check;
  std::function<void(const std::vector<std::string>&, Timeout)> wait;
  std::function<int64_t()> numKeys;
  Timeout timeout{300000};
};

// Thrown by StoreFunctions when the torch store timed out (it reports that as a plain
// RuntimeError); our side turns it into c10d::TimeoutError naming the keys.
class StoreTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A started operation: one or more of our Works (allgather_coalesced issues several).
// Threading: any method from any thread.
class Op {
 public:
  struct Impl;
  explicit Op(std::unique_ptr<Impl> impl);
  ~Op();

  bool completed() const;
  // The first error of the op's Works once they have all ended; null while running or on success.
  std::exception_ptr error() const;
  // Blocks until every Work ended and rethrows the first error; timeout -1: the op's own.
  void wait(Timeout timeout) const;
  // The sender of a completed receive; -1 otherwise.
  int sourceRank() const;
  // Runs done(error or null) once, when every Work has ended and before wait() returns: on the
  // thread that ends the last one, or at once on this thread when they have already.
  void onComplete(std::function<void(std::exception_ptr)> done);

 private:
  std::unique_ptr<Impl> impl_;
};

struct GroupOptions {
  std::string backendSpec;  // "" : C10D_BACKEND, else gloo
  Timeout timeout{1800000};
  std::string name;
};

// One of our ProcessGroups over a torch store, with torch's calling conventions: ranks within
// the group, one tensor per call.
class Group {
 public:
  struct Impl;
  // Rendezvous happens here: blocks until every rank of the group has come (or timeout).
  Group(StoreFunctions store, int rank, int size, GroupOptions options);
  ~Group();

  int rank() const;
  int size() const;
  const std::string& backendSpec() const;
  // Collectives this rank issued on the group (torch's sequence number).
  uint64_t sequence() const;

  using Ref = const TensorRef&;
  using Refs = const std::vector<TensorRef>&;
  std::shared_ptr<Op> broadcast(Ref tensor, int root, Timeout timeout);
  std::shared_ptr<Op> allreduce(Ref tensor, ReduceSpec op, Timeout timeout);
  std::shared_ptr<Op> allreduceCoalesced(Refs tensors, ReduceSpec op, Timeout timeout);
  std::shared_ptr<Op> reduce(Ref tensor, ReduceSpec op, int root, Timeout timeout);
  std::shared_ptr<Op> allgather(Refs outputs, Ref input, Timeout timeout);
  std::shared_ptr<Op> allgatherIntoTensor(Ref output, Ref input, Timeout timeout);
  // outputs[r][i] receives rank r's inputs[i] (torch's all_gather_coalesced).
  std::shared_ptr<Op> allgatherCoalesced(const std::vector<std::vector<TensorRef>>& outputs,
                                         Refs inputs, Timeout timeout);
  std::shared_ptr<Op> gather(Refs outputs, Ref input, int root, Timeout timeout);
  std::shared_ptr<Op> scatter(Ref output, Refs inputs, int root, Timeout timeout);
  std::shared_ptr<Op> reduceScatter(Ref output, Refs inputs, ReduceSpec op, Timeout timeout);
  std::shared_ptr<Op> reduceScatterTensor(Ref output, Ref input, ReduceSpec op, Timeout timeout);
  std::shared_ptr<Op> alltoall(Refs outputs, Refs inputs, Timeout timeout);
  std::shared_ptr<Op> alltoallBase(Ref output, Ref input, const std::vector<int64_t>& outputSplits,
                                   const std::vector<int64_t>& inputSplits, Timeout timeout);
  std::shared_ptr<Op> barrier(Timeout timeout);
  void monitoredBarrier(Timeout timeout, bool waitAllRanks);
  std::shared_ptr<Op> send(Ref tensor, int dst, int tag);
  std::shared_ptr<Op> recv(Ref tensor, int src, int tag);
  std::shared_ptr<Op> recvAnysource(Ref tensor, int tag);
  void shutdown();

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace torch_bridge
