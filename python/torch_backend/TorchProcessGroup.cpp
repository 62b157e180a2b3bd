#include "python/torch_backend/TorchProcessGroup.hpp"

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <Python.h>
#include <c10/util/Exception.h>

#include <pthread.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

namespace torch_backend {

namespace {

using torch_bridge::DType;
using torch_bridge::TensorRef;

DType dtypeOf(const at::Tensor& tensor, const char* op) {
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return DType::Float32;
    case at::kDouble:
      return DType::Float64;
    case at::kHalf:
      return DType::Float16;
    case at::kBFloat16:
      return DType::BFloat16;
    case at::kChar:
      return DType::Int8;
    case at::kShort:
      return DType::Int16;
    case at::kInt:
      return DType::Int32;
    case at::kLong:
      return DType::Int64;
    case at::kByte:
      return DType::UInt8;
    case at::kBool:
      return DType::Bool;
    default:
      TORCH_CHECK(false, "c10d backend: ", op, " does not take ", tensor.scalar_type(),
                  " tensors; it takes float32, float64, float16, bfloat16, int8, int16, int32, "
                  "int64, uint8 and bool (view a complex tensor with torch.view_as_real)");
  }
}

TensorRef refOf(const at::Tensor& tensor, const char* op) {
  TORCH_CHECK(tensor.defined(), "c10d backend: ", op, " got an undefined tensor");
  TORCH_CHECK(tensor.layout() == at::kStrided, "c10d backend: ", op,
              " takes dense tensors, got layout ", tensor.layout());
  TORCH_CHECK(tensor.is_cpu() || tensor.is_cuda(), "c10d backend: ", op,
              " takes CPU or CUDA tensors, got one on ", tensor.device());
  TensorRef ref;
  ref.data = tensor.data_ptr();
  ref.dtype = dtypeOf(tensor, op);
  ref.sizes.assign(tensor.sizes().begin(), tensor.sizes().end());
  ref.strides.assign(tensor.strides().begin(), tensor.strides().end());
  ref.cudaDevice = tensor.is_cuda() ? tensor.device().index() : -1;
  ref.keepAlive = std::make_shared<at::Tensor>(tensor);
  return ref;
}

std::vector<TensorRef> refsOf(const std::vector<at::Tensor>& tensors, const char* op) {
  std::vector<TensorRef> refs;
  refs.reserve(tensors.size());
  for (const auto& tensor : tensors) refs.push_back(refOf(tensor, op));
  return refs;
}

// torch's per-device lists come from a time when one process drove several GPUs; we serve one
// device per process, as torch's NCCL backend does since 2.0.
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "c10d backend: ", op, " takes one tensor per call, got ",
              tensors.size(), " (one device per process)");
  return tensors[0];
}

const std::vector<at::Tensor>& singleList(const std::vector<std::vector<at::Tensor>>& lists,
                                          const char* op) {
  TORCH_CHECK(lists.size() == 1, "c10d backend: ", op, " takes one list of tensors per call, got ",
              lists.size(), " (one device per process)");
  return lists[0];
}

void checkRootTensor(int64_t rootTensor, const char* op) {
  TORCH_CHECK(rootTensor == 0, "c10d backend: ", op, " got rootTensor ", rootTensor,
              "; with one tensor per call it must be 0");
}

torch_bridge::ReduceSpec reduceOf(const ::c10d::ReduceOp& op) {
  using torch_bridge::Reduce;
  switch (op.op_) {
    case ::c10d::ReduceOp::SUM:
      return {Reduce::Sum};
    case ::c10d::ReduceOp::AVG:
      return {Reduce::Avg};
    case ::c10d::ReduceOp::PRODUCT:
      return {Reduce::Product};
    case ::c10d::ReduceOp::MIN:
      return {Reduce::Min};
    case ::c10d::ReduceOp::MAX:
      return {Reduce::Max};
    case ::c10d::ReduceOp::BAND:
      return {Reduce::Band};
    case ::c10d::ReduceOp::BOR:
      return {Reduce::Bor};
    case ::c10d::ReduceOp::BXOR:
      return {Reduce::Bxor};
    case ::c10d::ReduceOp::PREMUL_SUM: {
      auto* factor = dynamic_cast<::c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(factor != nullptr, "c10d backend: PREMUL_SUM without its factor");
      if (factor->tensor_factors.empty()) return {Reduce::PremulSum, factor->double_factor};
      TORCH_CHECK(factor->tensor_factors.size() == 1 && factor->tensor_factors[0].numel() == 1,
                  "c10d backend: PREMUL_SUM takes one scalar factor");
      return {Reduce::PremulSum, factor->tensor_factors[0].item<double>()};
    }
    default:
      break;
  }
  TORCH_CHECK(false, "c10d backend: unknown reduce op ", static_cast<int>(op.op_));
}

bool mentionsTimeout(const char* what) {
  std::string text(what);
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text.find("timeout") != std::string::npos || text.find("timed out") != std::string::npos;
}

// torch's stores report a timeout as a plain RuntimeError; the bridge wants it told apart.
template <typename Call>
auto rethrowingTimeouts(Call&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const c10::Error& e) {
    if (mentionsTimeout(e.what_without_backtrace())) {
      throw torch_bridge::StoreTimeout(e.what_without_backtrace());
    }
    throw std::runtime_error(e.what_without_backtrace());
  } catch (const std::exception& e) {
    if (mentionsTimeout(e.what())) throw torch_bridge::StoreTimeout(e.what());
    throw;
  }
}

torch_bridge::StoreFunctions storeFunctions(c10::intrusive_ptr<::c10d::Store> store) {
  torch_bridge::StoreFunctions f;
  f.timeout = store->getTimeout();
  f.set = [store](const std::string& key, const std::vector<uint8_t>& value) {
    rethrowingTimeouts([&] { store->set(key, value); });
  };
  f.get = [store](const std::string& key) {
    return rethrowingTimeouts([&] { return store->get(key); });
  };
  f.add = [store](const std::string& key, int64_t delta) {
    return rethrowingTimeouts([&] { return store->add(key, delta); });
  };
  f.compareSet = [store](const std::string& key, const std::vector<uint8_t>& expected,
                         const std::vector<uint8_t>& desired) {
    return rethrowingTimeouts([&] { return store->compareSet(key, expected, desired); });
  };
  f.deleteKey = [store](const std::string& key) {
    return rethrowingTimeouts([&] { return store->deleteKey(key); });
  };
  f.check = [store](const std::vector<std::string>& keys) {
    return rethrowingTimeouts([&] { return store->check(keys); });
  };
  f.wait = [store](const std::vector<std::string>& keys, torch_bridge::Timeout timeout) {
    rethrowingTimeouts([&] { store->wait(keys, timeout); });
  };
  f.numKeys = [store] { return rethrowingTimeouts([&] { return store->getNumKeys(); }); };
  return f;
}

// Where torch's Futures complete when our backend's own thread ended the op. torch's callbacks
// run inside markCompleted, and some block on a further op of the same group (PowerSGD's hook
// waits on its second all_reduce inside then()): run on the backend's worker, that op would
// queue behind the callback waiting for it. A thread of this pool may block so; another thread
// starts when none is idle, so no completion ever waits behind a blocked one.
class CompletionThreads {
 public:
  static CompletionThreads& instance() {
    static auto* threads = new CompletionThreads();  // never destroyed: its threads outlive main
    return *threads;
  }

  void post(std::function<void()> task) {
    std::unique_lock<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
    // A thread counts as idle until it wakes: more tasks than idle threads start another, so
    // no task waits behind one that blocks.
    if (tasks_.size() > static_cast<size_t>(idle_)) {
      std::thread([this] { run(); }).detach();
    } else {
      ready_.notify_one();
    }
  }

  // Waits (at most `limit`) until no task is queued or running; false when the limit passed.
  // Called at interpreter exit, without the GIL: a torch callback still running then would
  // need the GIL once finalization has begun, and Python ends such a thread with pthread_exit,
  // whose unwinding through torch's noexcept frames aborts the process ("terminate called
  // without an active exception" in 2 to 5 of 10 runs of tests/integration/torch/ddp_equality.py:
  // the waiter of the last op's Future wakes before that Future's callbacks have finished).
  bool drain(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    return drained_.wait_for(lock, limit, [this] { return tasks_.empty() && busy_ == 0; });
  }

 private:
  void run() {
    pthread_setname_np(pthread_self(), "c10d-torch-done");
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ++idle_;
      ready_.wait(lock, [this] { return !tasks_.empty(); });
      --idle_;
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      ++busy_;
      lock.unlock();
      try {
        task();
      } catch (...) {
        // torch's Future keeps a callback's error in the Future it returned; nothing else can
        // escape, and a detached thread must not terminate the process.
      }
      lock.lock();
      if (--busy_ == 0 && tasks_.empty()) drained_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::condition_variable drained_;
  std::deque<std::function<void()>> tasks_;
  int idle_ = 0;
  int busy_ = 0;  // threads running a task
};

// The profiler keeps a label's pointer until the op's event ends, which may be after the group
// is gone: labels live for the process (a handful per backend name).
const char* internLabel(const std::string& label) {
  static std::mutex mutex;
  static auto* labels = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  return labels->insert(label).first->c_str();
}

// Set while a thread waits on a TorchWork: an op that ends on that thread (our backend runs a
// waited-for op on the waiting thread) completes torch's Future there, without a hand-off.
thread_local bool tlWaiting = false;

}  // namespace

bool drainCompletions(std::chrono::milliseconds limit) {
  return CompletionThreads::instance().drain(limit);
}

TorchWork::TorchWork(std::shared_ptr<torch_bridge::Op> op, ::c10d::OpType type,
                     const char* profilingTitle, const std::vector<at::Tensor>& inputs,
                     std::vector<at::Tensor> outputs)
    : ::c10d::Work(-1, type, profilingTitle,
                   profilingTitle ? c10::optional<std::vector<at::Tensor>>(inputs) : c10::nullopt),
      op_(std::move(op)),
      outputs_(std::move(outputs)) {
  std::vector<c10::Device> devices;
  for (const auto& tensor : outputs_) {
    if (tensor.is_cuda() &&
        std::find(devices.begin(), devices.end(), tensor.device()) == devices.end()) {
      devices.push_back(tensor.device());
    }
  }
  future_ =
      c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors(), std::move(devices));
  // The profiler's event ends with the op, on whichever thread ends it (the Work may be gone).
  auto complete = [future = future_, outputs = outputs_,
                   endProfiling = std::move(recordFunctionEndCallback_)](std::exception_ptr error) {
    if (endProfiling) endProfiling();
    if (error) {
      future->setError(error);
    } else {
      future->markCompleted(c10::IValue(outputs));
    }
  };
  op_->onComplete([complete = std::move(complete)](std::exception_ptr error) mutable {
    if (tlWaiting) {
      complete(error);
    } else {
      CompletionThreads::instance().post(
          [complete = std::move(complete), error]() mutable { complete(error); });
    }
  });
}

bool TorchWork::isCompleted() {
  return op_->completed();
}
bool TorchWork::isSuccess() const {
  return op_->completed() && !op_->error();
}
std::exception_ptr TorchWork::exception() const {
  return op_->error();
}

int TorchWork::sourceRank() const {
  int rank = op_->sourceRank();
  TORCH_CHECK(rank >= 0, "c10d backend: sourceRank() is only known for a completed receive");
  return rank;
}

std::vector<at::Tensor> TorchWork::result() {
  wait(kNoTimeout);
  return outputs_;
}

bool TorchWork::wait(std::chrono::milliseconds timeout) {
  // Restores the outer value: a callback run inline may itself wait on another Work.
  struct Waiting {
    bool outer = tlWaiting;
    Waiting() { tlWaiting = true; }
    ~Waiting() { tlWaiting = outer; }
  };
  {
    Waiting waiting;
    op_->wait(timeout == kNoTimeout ? torch_bridge::Timeout(-1) : timeout);
  }
  // Ended on our backend's thread, the op's Future completes on a completion thread: whoever
  // waited finds it complete (and the profiler's event ended), as with torch's gloo.
  future_->wait();
  return true;
}

void TorchWork::abort() {
  TORCH_CHECK(false,
              "c10d backend: Work.abort() is not supported; destroy the process group "
              "(its pending operations then fail)");
}

// ---------------------------------------------------------------------------------------------

TorchProcessGroup::TorchProcessGroup(c10::intrusive_ptr<::c10d::Store> store, int rank, int size,
                                     std::chrono::milliseconds timeout, std::string name,
                                     std::string backendSpec, std::string profilerName)
    : ::c10d::ProcessGroup(rank, size), profilerName_(std::move(profilerName)) {
  using ::c10d::OpType;
  // torch's gloo labels, so profiles of the two backends line up.
  const std::pair<OpType, const char*> labels[] = {
      {OpType::BROADCAST, "broadcast"},
      {OpType::ALLREDUCE, "all_reduce"},
      {OpType::ALLREDUCE_COALESCED, "all_reduce"},
      {OpType::REDUCE, "reduce"},
      {OpType::ALLGATHER, "all_gather"},
      {OpType::_ALLGATHER_BASE, "all_gather_into_tensor"},
      {OpType::ALLGATHER_COALESCED, "all_gather"},
      {OpType::GATHER, "gather"},
      {OpType::SCATTER, "scatter"},
      {OpType::REDUCE_SCATTER, "reduce_scatter"},
      {OpType::ALLTOALL_BASE, "all_to_all"},
      {OpType::ALLTOALL, "all_to_all"},
      {OpType::SEND, "send"},
      {OpType::RECV, "recv"},
      {OpType::RECVANYSOURCE, "recvAnySource"},
      {OpType::BARRIER, "barrier"},
      {OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor"},
  };
  for (const auto& [type, label] : labels) {
    profilingTitles_.at(static_cast<size_t>(type)) = internLabel(profilerName_ + ":" + label);
  }
  torch_bridge::GroupOptions options;
  options.backendSpec = std::move(backendSpec);
  options.timeout = timeout;
  options.name = std::move(name);
  group_ = std::make_unique<torch_bridge::Group>(storeFunctions(std::move(store)), rank, size,
                                                 std::move(options));
  init();
}

// Python's holder drops its reference without the GIL, but the last one may be torch's (DDP's
// Reducer, freed by Python with the GIL held). Destroying the group joins our threads, and one
// may be dropping the last reference to a tensor, whose destructor takes the GIL: without the
// GIL released here, that join never ends.
TorchProcessGroup::~TorchProcessGroup() {
  if (Py_IsInitialized() && PyGILState_Check()) {
    PyThreadState* saved = PyEval_SaveThread();
    group_.reset();
    PyEval_RestoreThread(saved);
  }
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::work(std::shared_ptr<torch_bridge::Op> op,
                                                         ::c10d::OpType type,
                                                         const std::vector<at::Tensor>& inputs,
                                                         std::vector<at::Tensor> outputs) const {
  // Without the profiler's callbacks, no label: torch's Work then skips its RecordFunction (an
  // allocation per op).
  const char* title = at::hasCallbacks() ? profilingTitles_.at(static_cast<size_t>(type)) : nullptr;
  return c10::make_intrusive<TorchWork>(std::move(op), type, title, inputs, std::move(outputs));
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::broadcast(
    Tensors& tensors, const ::c10d::BroadcastOptions& opts) {
  const auto& tensor = single(tensors, "broadcast");
  checkRootTensor(opts.rootTensor, "broadcast");
  return work(
      group_->broadcast(refOf(tensor, "broadcast"), static_cast<int>(opts.rootRank), opts.timeout),
      ::c10d::OpType::BROADCAST, tensors, tensors);
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::allreduce(
    Tensors& tensors, const ::c10d::AllreduceOptions& opts) {
  const auto& tensor = single(tensors, "allreduce");
  return work(group_->allreduce(refOf(tensor, "allreduce"), reduceOf(opts.reduceOp), opts.timeout),
              ::c10d::OpType::ALLREDUCE, tensors, tensors);
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::allreduce_coalesced(
    Tensors& tensors, const ::c10d::AllreduceCoalescedOptions& opts) {
  return work(group_->allreduceCoalesced(refsOf(tensors, "allreduce_coalesced"),
                                         reduceOf(opts.reduceOp), opts.timeout),
              ::c10d::OpType::ALLREDUCE_COALESCED, tensors, tensors);
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::reduce(Tensors& tensors,
                                                           const ::c10d::ReduceOptions& opts) {
  const auto& tensor = single(tensors, "reduce");
  checkRootTensor(opts.rootTensor, "reduce");
  return work(group_->reduce(refOf(tensor, "reduce"), reduceOf(opts.reduceOp),
                             static_cast<int>(opts.rootRank), opts.timeout),
              ::c10d::OpType::REDUCE, tensors, tensors);
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::allgather(
    TensorLists& outputs, Tensors& inputs, const ::c10d::AllgatherOptions& opts) {
  const auto& input = single(inputs, "allgather");
  const auto& outputList = singleList(outputs, "allgather");
  return work(
      group_->allgather(refsOf(outputList, "allgather"), refOf(input, "allgather"), opts.timeout),
      ::c10d::OpType::ALLGATHER, inputs, outputList);
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::_allgather_base(
    at::Tensor& output, at::Tensor& input, const ::c10d::AllgatherOptions& opts) {
  return work(group_->allgatherIntoTensor(refOf(output, "_allgather_base"),
                                          refOf(input, "_allgather_base"), opts.timeout),
              ::c10d::OpType::_ALLGATHER_BASE, {input}, {output});
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::allgather_coalesced(
    TensorLists& outputs, Tensors& inputs, const ::c10d::AllgatherOptions& opts) {
  std::vector<std::vector<TensorRef>> outputRefs;
  std::vector<at::Tensor> flat;
  for (const auto& list : outputs) {
    outputRefs.push_back(refsOf(list, "allgather_coalesced"));
    flat.insert(flat.end(), list.begin(), list.end());
  }
  return work(
      group_->allgatherCoalesced(outputRefs, refsOf(inputs, "allgather_coalesced"), opts.timeout),
      ::c10d::OpType::ALLGATHER_COALESCED, inputs, std::move(flat));
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::gather(TensorLists& outputs, Tensors& inputs,
                                                           const ::c10d::GatherOptions& opts) {
  const auto& input = single(inputs, "gather");
  // Non-roots pass an empty list (torch) or none at all.
  std::vector<at::Tensor> outputList;
  if (!outputs.empty()) outputList = singleList(outputs, "gather");
  return work(group_->gather(refsOf(outputList, "gather"), refOf(input, "gather"),
                             static_cast<int>(opts.rootRank), opts.timeout),
              ::c10d::OpType::GATHER, inputs, outputList);
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::scatter(Tensors& outputs, TensorLists& inputs,
                                                            const ::c10d::ScatterOptions& opts) {
  const auto& output = single(outputs, "scatter");
  std::vector<at::Tensor> inputList;
  if (!inputs.empty()) inputList = singleList(inputs, "scatter");
  return work(group_->scatter(refOf(output, "scatter"), refsOf(inputList, "scatter"),
                              static_cast<int>(opts.rootRank), opts.timeout),
              ::c10d::OpType::SCATTER, inputList, outputs);
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::reduce_scatter(
    Tensors& outputs, TensorLists& inputs, const ::c10d::ReduceScatterOptions& opts) {
  const auto& output = single(outputs, "reduce_scatter");
  return work(group_->reduceScatter(refOf(output, "reduce_scatter"),
                                    refsOf(singleList(inputs, "reduce_scatter"), "reduce_scatter"),
                                    reduceOf(opts.reduceOp), opts.timeout),
              ::c10d::OpType::REDUCE_SCATTER, singleList(inputs, "reduce_scatter"), outputs);
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) {
  return work(group_->reduceScatterTensor(refOf(output, "_reduce_scatter_base"),
                                          refOf(input, "_reduce_scatter_base"),
                                          reduceOf(opts.reduceOp), opts.timeout),
              ::c10d::OpType::_REDUCE_SCATTER_BASE, {input}, {output});
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
    std::vector<int64_t>& inputSplits, const ::c10d::AllToAllOptions& opts) {
  return work(group_->alltoallBase(refOf(output, "alltoall_base"), refOf(input, "alltoall_base"),
                                   outputSplits, inputSplits, opts.timeout),
              ::c10d::OpType::ALLTOALL_BASE, {input}, {output});
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::alltoall(Tensors& outputs, Tensors& inputs,
                                                             const ::c10d::AllToAllOptions& opts) {
  return work(
      group_->alltoall(refsOf(outputs, "alltoall"), refsOf(inputs, "alltoall"), opts.timeout),
      ::c10d::OpType::ALLTOALL, inputs, outputs);
}

void TorchProcessGroup::monitoredBarrier(const ::c10d::BarrierOptions& opts, bool waitAllRanks) {
  group_->monitoredBarrier(opts.timeout, waitAllRanks);
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::send(Tensors& tensors, int dstRank, int tag) {
  return work(group_->send(refOf(single(tensors, "send"), "send"), dstRank, tag),
              ::c10d::OpType::SEND, tensors, tensors);
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::recv(Tensors& tensors, int srcRank, int tag) {
  return work(group_->recv(refOf(single(tensors, "recv"), "recv"), srcRank, tag),
              ::c10d::OpType::RECV, tensors, tensors);
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::recvAnysource(Tensors& tensors, int tag) {
  return work(group_->recvAnysource(refOf(single(tensors, "recv"), "recv"), tag),
              ::c10d::OpType::RECVANYSOURCE, tensors, tensors);
}

c10::intrusive_ptr<::c10d::Work> TorchProcessGroup::barrier(const ::c10d::BarrierOptions& opts) {
  return work(group_->barrier(opts.timeout), ::c10d::OpType::BARRIER, {}, {});
}

}  // namespace torch_backend
