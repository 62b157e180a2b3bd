// Our half of the torch backend (Bridge.hpp): sees c10d's headers, never torch's.

#include <algorithm>
#include <atomic>
#include <mutex>

#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Config.hpp"
#include "python/torch_backend/Bridge.hpp"
#include "store/Store.hpp"

namespace torch_bridge {

namespace {

using c10d::Tensor;
using c10d::Work;

c10d::ScalarType scalarType(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return c10d::ScalarType::Float32;
    case DType::Float64:
      return c10d::ScalarType::Float64;
    case DType::Float16:
      return c10d::ScalarType::Float16;
    case DType::BFloat16:
      return c10d::ScalarType::BFloat16;
    case DType::Int8:
      return c10d::ScalarType::Int8;
    case DType::Int16:
      return c10d::ScalarType::Int16;
    case DType::Int32:
      return c10d::ScalarType::Int32;
    case DType::Int64:
      return c10d::ScalarType::Int64;
    case DType::UInt8:
      return c10d::ScalarType::UInt8;
    case DType::Bool:
      return c10d::ScalarType::Bool;
  }
  C10D_THROW(c10d::InvalidArgument, "torch backend: unknown dtype code ", static_cast<int>(dtype));
}

Tensor tensorOf(const TensorRef& ref) {
  return Tensor::fromBlob(
      ref.data, scalarType(ref.dtype), ref.sizes,
      ref.cudaDevice < 0 ? c10d::Device::cpu() : c10d::Device::cuda(ref.cudaDevice), ref.strides,
      ref.keepAlive);
}

std::vector<Tensor> tensorsOf(const std::vector<TensorRef>& refs) {
  std::vector<Tensor> tensors;
  tensors.reserve(refs.size());
  for (const auto& ref : refs) tensors.push_back(tensorOf(ref));
  return tensors;
}

c10d::ReduceOp reduceOf(ReduceSpec spec) {
  switch (spec.kind) {
    case Reduce::Sum:
      return c10d::ReduceOp::SUM;
    case Reduce::Avg:
      return c10d::ReduceOp::AVG;
    case Reduce::Product:
      return c10d::ReduceOp::PRODUCT;
    case Reduce::Min:
      return c10d::ReduceOp::MIN;
    case Reduce::Max:
      return c10d::ReduceOp::MAX;
    case Reduce::Band:
      return c10d::ReduceOp::BAND;
    case Reduce::Bor:
      return c10d::ReduceOp::BOR;
    case Reduce::Bxor:
      return c10d::ReduceOp::BXOR;
    case Reduce::PremulSum:
      return c10d::ReduceOp::premulSum(spec.factor);
  }
  C10D_THROW(c10d::InvalidArgument, "torch backend: unknown reduce op code ",
             static_cast<int>(spec.kind));
}

// A torch Store as ours. Torch's stores have no multi-key or append calls; they are built from
// the single-key ones. append retries compareSet until its own bytes are in; two ranks appending
// the same bytes to the same value would look like one (Gloo's failure log, the one user, writes
// each rank's own message).
class TorchStore final : public c10d::Store {
 public:
  explicit TorchStore(StoreFunctions functions)
      : c10d::Store(functions.timeout), f_(std::move(functions)) {}

  using Store::get;
  using Store::multiGet;
  using Store::wait;
  void set(const std::string& key, const Bytes& value) override {
    c10d::checkKey("set", key);
    c10d::checkValue("set", key, value.size());
    call("set", key, [&] { f_.set(key, value); });
  }
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    c10d::checkKey("get", key);
    return call("get", key, [&] {
      // torch's get waits up to the store's own timeout; another needs a wait first.
      if (timeout != f_.timeout) f_.wait({key}, timeout);
      return f_.get(key);
    });
  }
  int64_t add(const std::string& key, int64_t delta) override {
    c10d::checkKey("add", key);
    return call("add", key, [&] { return f_.add(key, delta); });
  }
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    c10d::checkKey("compareSet", key);
    return call("compareSet", key, [&] { return f_.compareSet(key, expected, desired); });
  }
  bool deleteKey(const std::string& key) override {
    c10d::checkKey("deleteKey", key);
    return call("deleteKey", key, [&] { return f_.deleteKey(key); });
  }
  bool check(const std::vector<std::string>& keys) override {
    c10d::checkKeys("check", keys);
    return call("check", keys, [&] { return f_.check(keys); });
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    c10d::checkKeys("wait", keys);
    call("wait", keys, [&] { f_.wait(keys, timeout); });
  }
  int64_t numKeys() override {
    return call("numKeys", std::vector<std::string>{}, [&] { return f_.numKeys(); });
  }
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys,
                              std::chrono::milliseconds timeout) override {
    wait(keys, timeout);
    std::vector<Bytes> values;
    values.reserve(keys.size());
    for (const auto& key : keys) {
      values.push_back(call("get", key, [&] { return f_.get(key); }));  // present: no wait
    }
    return values;
  }
  void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override {
    C10D_CHECK(keys.size() == values.size(), c10d::InvalidArgument, "multiSet: ", keys.size(),
               " keys but ", values.size(), " values");
    for (size_t i = 0; i < keys.size(); ++i) set(keys[i], values[i]);
  }
  void append(const std::string& key, const Bytes& value) override {
    Bytes current;
    for (;;) {
      Bytes desired = current;
      desired.insert(desired.end(), value.begin(), value.end());
      Bytes now = compareSet(key, current, desired);
      if (now == desired) return;
      // compareSet of an absent key with a non-empty expectation hands the expectation back.
      if (now == current && !current.empty() && !check({key})) {
        current.clear();
        continue;
      }
      current = std::move(now);
    }
  }

 private:
  // Runs a torch store call; its failures become our StoreError/TimeoutError naming op and key
  // (the keys are only described when a call fails).
  template <typename Call>
  auto call(const char* op, const std::string& key, Call&& body) -> decltype(body()) {
    return call(op, std::vector<std::string>{key}, std::forward<Call>(body));
  }
  template <typename Call>
  auto call(const char* op, const std::vector<std::string>& keys, Call&& body) -> decltype(body()) {
    try {
      return body();
    } catch (const StoreTimeout& e) {
      std::string key = c10d::describeKeys(keys);
      throw c10d::TimeoutError(
          std::string("torch store ") + op + " '" + key + "' timed out: " + e.what(),
          {.op = std::string("store ") + op, .key = key});
    } catch (const c10d::Error&) {
      throw;
    } catch (const std::exception& e) {
      std::string key = c10d::describeKeys(keys);
      throw c10d::StoreError(
          std::string("torch store ") + op + " '" + key + "' failed: " + e.what(),
          {.op = std::string("store ") + op, .key = key});
    }
  }

  StoreFunctions f_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------

struct Op::Impl {
  std::vector<std::shared_ptr<Work>> works;
};

Op::Op(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Op::~Op() = default;

bool Op::completed() const {
  for (const auto& work : impl_->works) {
    if (!work->isCompleted()) return false;
  }
  return true;
}

std::exception_ptr Op::error() const {
  if (!completed()) return nullptr;
  for (const auto& work : impl_->works) {
    if (auto error = work->exception()) return error;
  }
  return nullptr;
}

void Op::wait(Timeout timeout) const {
  for (const auto& work : impl_->works) work->wait(timeout);
}

int Op::sourceRank() const {
  const auto& works = impl_->works;
  return works.size() == 1 && works[0]->hasSourceRank() ? works[0]->sourceRank() : -1;
}

// Completion hooks rather than callbacks: they run before wait() returns, so whoever waited on
// the op finds torch's Future completed and the profiler's event ended (torch's gloo does the
// same).
void Op::onComplete(std::function<void(std::exception_ptr)> done) {
  const auto& works = impl_->works;
  if (works.size() == 1) {
    works[0]->getFuture()->addCompletionHook(
        [done = std::move(done)](c10d::Future& future) { done(future.error()); });
    return;
  }
  // The last Work to end reports the first error in issue order.
  struct Countdown {
    std::atomic<size_t> left;
    std::vector<std::shared_ptr<Work>> works;
    std::function<void(std::exception_ptr)> done;
  };
  auto countdown = std::make_shared<Countdown>();
  countdown->left = works.size();
  countdown->works = works;
  countdown->done = std::move(done);
  if (works.empty()) {
    countdown->done(nullptr);
    return;
  }
  for (const auto& work : works) {
    work->getFuture()->addCompletionHook([countdown](c10d::Future&) {
      if (countdown->left.fetch_sub(1) != 1) return;
      std::exception_ptr first;
      for (const auto& w : countdown->works) {
        if ((first = w->exception())) break;
      }
      auto done = std::move(countdown->done);
      countdown->works.clear();  // the Works' futures hold this callback: break the cycle
      done(first);
    });
  }
}

// ---------------------------------------------------------------------------------------------

struct Group::Impl {
  std::shared_ptr<c10d::ProcessGroup> group;
  std::atomic<uint64_t> sequence{0};

  std::shared_ptr<Op> op(std::shared_ptr<Work> work) {
    auto impl = std::make_unique<Op::Impl>();
    impl->works.push_back(std::move(work));
    return std::make_shared<Op>(std::move(impl));
  }
  std::shared_ptr<Op> collective(std::shared_ptr<Work> work) {
    sequence.fetch_add(1, std::memory_order_relaxed);
    return op(std::move(work));
  }
};

Group::Group(StoreFunctions store, int rank, int size, GroupOptions options)
    : impl_(std::make_unique<Impl>()) {
  c10d::ProcessGroupOptions groupOptions;
  groupOptions.backend =
      options.backendSpec.empty() ? c10d::config::value("C10D_BACKEND") : options.backendSpec;
  groupOptions.timeout = options.timeout;
  groupOptions.groupName = options.name;
  impl_->group = std::make_shared<c10d::ProcessGroup>(
      std::make_shared<TorchStore>(std::move(store)), rank, size, groupOptions);
}

Group::~Group() = default;

int Group::rank() const {
  return impl_->group->rank();
}
int Group::size() const {
  return impl_->group->size();
}
const std::string& Group::backendSpec() const {
  return impl_->group->backendSpec();
}
uint64_t Group::sequence() const {
  return impl_->sequence.load(std::memory_order_relaxed);
}

std::shared_ptr<Op> Group::broadcast(Ref tensor, int root, Timeout timeout) {
  return impl_->collective(impl_->group->broadcast(tensorOf(tensor), {root, timeout}));
}

std::shared_ptr<Op> Group::allreduce(Ref tensor, ReduceSpec op, Timeout timeout) {
  return impl_->collective(impl_->group->allreduce(tensorOf(tensor), {reduceOf(op), timeout}));
}

std::shared_ptr<Op> Group::allreduceCoalesced(Refs tensors, ReduceSpec op, Timeout timeout) {
  return impl_->collective(
      impl_->group->allreduceCoalesced(tensorsOf(tensors), {reduceOf(op), timeout}));
}

std::shared_ptr<Op> Group::reduce(Ref tensor, ReduceSpec op, int root, Timeout timeout) {
  return impl_->collective(impl_->group->reduce(tensorOf(tensor), {reduceOf(op), root, timeout}));
}

std::shared_ptr<Op> Group::allgather(Refs outputs, Ref input, Timeout timeout) {
  return impl_->collective(impl_->group->allgather(tensorsOf(outputs), tensorOf(input), {timeout}));
}

std::shared_ptr<Op> Group::allgatherIntoTensor(Ref output, Ref input, Timeout timeout) {
  return impl_->collective(
      impl_->group->allgatherIntoTensor(tensorOf(output), tensorOf(input), {timeout}));
}

std::shared_ptr<Op> Group::allgatherCoalesced(const std::vector<std::vector<TensorRef>>& outputs,
                                              Refs inputs, Timeout timeout) {
  C10D_CHECK(static_cast<int>(outputs.size()) == size(), c10d::InvalidArgument,
             "allgather_coalesced: ", outputs.size(), " output lists for a group of ", size(),
             "; give one list per rank, each with one tensor per input");
  for (size_t r = 0; r < outputs.size(); ++r) {
    C10D_CHECK(outputs[r].size() == inputs.size(), c10d::InvalidArgument,
               "allgather_coalesced: output list ", r, " has ", outputs[r].size(), " tensors for ",
               inputs.size(), " inputs; give one tensor per input");
  }
  // Every input checked before any allgather is issued: one refused midway would leave this
  // rank's earlier ones unmatched on the others.
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (size_t r = 0; r < outputs.size(); ++r) {
      C10D_CHECK(outputs[r][i].dtype == inputs[i].dtype && outputs[r][i].sizes == inputs[i].sizes,
                 c10d::InvalidArgument, "allgather_coalesced: output ", r, "[", i,
                 "] is not shaped and typed like input ", i,
                 "; give each rank's list tensors like the inputs");
    }
  }
  auto impl = std::make_unique<Op::Impl>();
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<Tensor> gathered;
    for (const auto& list : outputs) gathered.push_back(tensorOf(list[i]));
    impl->works.push_back(impl_->group->allgather(gathered, tensorOf(inputs[i]), {timeout}));
  }
  impl_->sequence.fetch_add(1, std::memory_order_relaxed);
  return std::make_shared<Op>(std::move(impl));
}

std::shared_ptr<Op> Group::gather(Refs outputs, Ref input, int root, Timeout timeout) {
  return impl_->collective(
      impl_->group->gather(tensorsOf(outputs), tensorOf(input), {root, timeout}));
}

std::shared_ptr<Op> Group::scatter(Ref output, Refs inputs, int root, Timeout timeout) {
  return impl_->collective(
      impl_->group->scatter(tensorOf(output), tensorsOf(inputs), {root, timeout}));
}

std::shared_ptr<Op> Group::reduceScatter(Ref output, Refs inputs, ReduceSpec op, Timeout timeout) {
  return impl_->collective(
      impl_->group->reduceScatter(tensorOf(output), tensorsOf(inputs), {reduceOf(op), timeout}));
}

std::shared_ptr<Op> Group::reduceScatterTensor(Ref output, Ref input, ReduceSpec op,
                                               Timeout timeout) {
  return impl_->collective(impl_->group->reduceScatterTensor(tensorOf(output), tensorOf(input),
                                                             {reduceOf(op), timeout}));
}

std::shared_ptr<Op> Group::alltoall(Refs outputs, Refs inputs, Timeout timeout) {
  return impl_->collective(
      impl_->group->alltoall(tensorsOf(outputs), tensorsOf(inputs), {timeout}));
}

std::shared_ptr<Op> Group::alltoallBase(Ref output, Ref input,
                                        const std::vector<int64_t>& outputSplits,
                                        const std::vector<int64_t>& inputSplits, Timeout timeout) {
  return impl_->collective(impl_->group->alltoallBase(tensorOf(output), tensorOf(input),
                                                      outputSplits, inputSplits, {timeout}));
}

std::shared_ptr<Op> Group::barrier(Timeout timeout) {
  return impl_->collective(impl_->group->barrier({timeout}));
}

void Group::monitoredBarrier(Timeout timeout, bool waitAllRanks) {
  // torch passes its timeout explicitly, 0 included (already out of time); ours must be positive.
  Timeout wait = timeout.count() == 0 ? Timeout(1) : timeout;  // -1 stays: the group's timeout
  try {
    impl_->group->monitoredBarrier({wait}, waitAllRanks);
  } catch (const c10d::TimeoutError& e) {
    // Worded first as torch's gloo words it: programs (and torch's tests) match on it.
    std::string torchWords;
    if (rank() != 0) {
      torchWords = c10d::detail::concat("Rank ", rank(),
                                        " successfully reached monitoredBarrier, but received "
                                        "errors while waiting for send/recv from rank 0");
    } else if (timeout.count() == 0 || e.context().peers.empty()) {
      torchWords = c10d::detail::concat("Rank 0 timed out in monitoredBarrier after ",
                                        timeout.count(), " ms");
    } else if (waitAllRanks) {  // every rank that did not arrive, ", "-separated
      std::string ranks;
      for (int peer : e.context().peers) {
        ranks += (ranks.empty() ? "" : ", ") + std::to_string(peer);
      }
      torchWords = c10d::detail::concat("Ranks ", ranks, " failed to pass monitoredBarrier in ",
                                        timeout.count(), " ms");
    } else {
      torchWords =
          c10d::detail::concat("Rank ", e.context().peers.front(),
                               " failed to pass monitoredBarrier in ", timeout.count(), " ms");
    }
    throw c10d::TimeoutError(torchWords + ": " + e.what(), e.context());
  }
}

std::shared_ptr<Op> Group::send(Ref tensor, int dst, int tag) {
  return impl_->op(impl_->group->send(tensorOf(tensor), dst, c10d::SendOptions{tag}));
}

std::shared_ptr<Op> Group::recv(Ref tensor, int src, int tag) {
  return impl_->op(impl_->group->recv(tensorOf(tensor), src, c10d::RecvOptions{tag}));
}

std::shared_ptr<Op> Group::recvAnysource(Ref tensor, int tag) {
  return impl_->op(impl_->group->recvAnysource(tensorOf(tensor), c10d::RecvOptions{tag}));
}

void Group::shutdown() {
  impl_->group->shutdown();
}

}  // namespace torch_bridge
