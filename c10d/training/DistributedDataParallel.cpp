// The reducer: buckets of gradients reduced in bucket order as they fill (see the header). One
// mutex orders the marks and the launches; copies into buckets run outside it, since each
// gradient has a slot of its own and its bucket cannot launch before its mark is counted.

#include "c10d/training/DistributedDataParallel.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>

#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Half.hpp"
#include "c10d/core/Kernels.hpp"
#include "c10d/training/HostValues.hpp"

namespace c10d::inline v1 {

namespace {

// Elements [offset, offset + numel) of flat, shaped as sizes: a view sharing flat's memory.
Tensor slice(const Tensor& flat, int64_t offset, const std::vector<int64_t>& sizes) {
  char* base = static_cast<char*>(flat.data()) + offset * static_cast<int64_t>(flat.elementSize());
  return Tensor::fromBlob(base, flat.dtype(), sizes, flat.device(), {}, flat.holder());
}

void zeroFill(const Tensor& tensor) {
  if (tensor.nbytes() == 0) return;
  if (tensor.device().isCPU()) {
    std::memset(tensor.data(), 0, tensor.nbytes());
  } else {
    copyTensor(tensor, Tensor::zeros(tensor.sizes(), tensor.dtype()));
  }
}

Tensor zeroTensor(int64_t numel, ScalarType dtype, const Device& device) {
  Tensor zeros = Tensor::empty({numel}, dtype, device);
  zeroFill(zeros);
  return zeros;
}

std::string describeParameter(size_t index, const std::string& name) {
  return name.empty() ? detail::concat(index) : detail::concat(index, " '", name, "'");
}

struct Bucket {
  Tensor buffer;  // undefined with transientBuckets, except between its first copy and launch
  int64_t numel = 0;
  ScalarType dtype = ScalarType::Float32;
  Device device;
  std::vector<size_t> parameters;
  std::vector<int64_t> offsets;  // of each parameter's gradient in buffer, in elements
  size_t pending = 0;            // gradients not yet ready in this backward
  std::shared_ptr<Future> result;
};

}  // namespace

struct DistributedDataParallel::Impl {
  ProcessGroup* group = nullptr;
  DataParallelOptions options;
  std::vector<DataParallelParameter> parameters;
  std::vector<Tensor> values;  // parameters[i].value, for assignBuckets
  Device commDevice;           // where the reducer's own small collectives run

  // The layout: buckets, and where each gradient lives in them.
  std::vector<Bucket> buckets;
  struct Slot {
    size_t bucket = 0;
    int64_t offset = 0;  // in the bucket, in elements
    Tensor view;  // the gradient's elements in its bucket, shaped like the parameter; undefined
                  // while a transient bucket has no buffer
  };
  std::vector<Slot> slots;
  bool rebuilt = false;  // the layout follows rank 0's ready order

  std::mutex mutex;                     // the state of the backward in progress, below
  std::vector<uint8_t> marked;          // by the framework in this backward
  std::vector<uint8_t> markedUnsynced;  // in the no-sync backwards since the last reduction
  std::vector<size_t> readyOrder;       // the first synchronised backward's marks, in order
  size_t nextLaunch = 0;
  bool launching = false;     // a thread is running hooks (outside the mutex), in bucket order
  bool launchFailed = false;  // a hook threw: later buckets stay unlaunched in this backward
  int syncing = -1;           // this backward reduces: latched at its first mark (-1: no mark)
  // finalizeBackward ran and no mark came since: a second one would run a backward's
  // collectives again. False at first, so a first backward that marks nothing is allowed.
  bool finalized = false;
  int activeRanks = -1;
  std::atomic<int> noSync{0};

  int worldSize() const { return group->size(); }
  double divisor() const {
    if (options.divideByInitialWorldSize || activeRanks <= 0) return worldSize();
    return activeRanks;
  }

  void build(const std::vector<size_t>& order) {
    std::vector<std::vector<size_t>> layout =
        detail::assignBuckets(values, order, options.firstBucketBytes, options.bucketCapBytes);
    std::vector<Slot> oldSlots = std::move(slots);
    buckets.clear();
    slots.assign(parameters.size(), Slot{});
    for (size_t b = 0; b < layout.size(); ++b) {
      Bucket bucket;
      bucket.parameters = layout[b];
      int64_t numel = 0;
      for (size_t i : bucket.parameters) {
        bucket.offsets.push_back(numel);
        numel += values[i].numel();
      }
      const Tensor& first = values[bucket.parameters.front()];
      bucket.numel = numel;
      bucket.dtype = first.dtype();
      bucket.device = first.device();
      for (size_t k = 0; k < bucket.parameters.size(); ++k) {
        slots[bucket.parameters[k]] = Slot{b, bucket.offsets[k], Tensor()};
      }
      buckets.push_back(std::move(bucket));
      if (!options.transientBuckets) allocateBuffer(b);
    }
    // Gradients that live in the buckets move with them.
    if (options.gradientAsBucketView) {
      for (size_t i = 0; i < parameters.size(); ++i) {
        if (oldSlots.empty()) {
          zeroFill(slots[i].view);
        } else {
          copyTensor(slots[i].view, oldSlots[i].view);
        }
      }
    }
    resetBackward();
  }

  // Gives bucket b a buffer and its gradients their views into it.
  void allocateBuffer(size_t b) {
    Bucket& bucket = buckets[b];
    bucket.buffer = Tensor::empty({bucket.numel}, bucket.dtype, bucket.device);
    for (size_t i : bucket.parameters) {
      slots[i].view = slice(bucket.buffer, slots[i].offset, values[i].sizes());
    }
  }

  // With the mutex held: a transient bucket's buffer exists from its first use in a backward.
  void ensureBuffer(size_t b) {
    if (!buckets[b].buffer.defined()) allocateBuffer(b);
  }

  // Drops the reducer's references to a transient bucket's buffer (its views hold it too).
  void releaseBuffer(size_t b) {
    if (!options.transientBuckets) return;
    buckets[b].buffer = Tensor();
    for (size_t i : buckets[b].parameters) slots[i].view = Tensor();
  }

  void resetBackward() {
    marked.assign(parameters.size(), 0);
    nextLaunch = 0;
    launchFailed = false;
    syncing = -1;
    activeRanks = -1;
    // A backward that did not rebuild (no-sync, failed) leaves no partial order behind.
    if (!rebuilt) readyOrder.clear();
    for (size_t b = 0; b < buckets.size(); ++b) {
      buckets[b].pending = buckets[b].parameters.size();
      buckets[b].result = nullptr;
      releaseBuffer(b);  // a bucket filled but never launched (a failed backward)
    }
  }

  // With lock held: reduces the buckets that are full, in bucket order. One thread at a time runs
  // the hooks, outside the mutex (a hook may wait for its collective); buckets that fill
  // meanwhile are picked up by that thread's loop.
  void launchReady(std::unique_lock<std::mutex>& lock) {
    if (launching) return;
    launching = true;
    while (!launchFailed && nextLaunch < buckets.size() && buckets[nextLaunch].pending == 0) {
      const size_t index = nextLaunch++;
      Tensor buffer = buckets[index].buffer;
      releaseBuffer(index);  // transient: the hook's captures alone keep it
      lock.unlock();
      std::shared_ptr<Future> result = runHook(index, buffer);
      lock.lock();
      buckets[index].result = result;
      // A later bucket would meet the other ranks' copy of this one: stop here.
      if (result->completed() && result->hasError()) launchFailed = true;
    }
    launching = false;
  }

  std::shared_ptr<Future> runHook(size_t index, const Tensor& buffer, bool shadow = false) {
    const Bucket& bucket = buckets[index];
    GradBucket view{index, buffer, ReduceOp::premulSum(1.0 / divisor()), bucket.parameters,
                    {},    shadow};
    for (size_t k = 0; k < bucket.parameters.size(); ++k) {
      view.gradients.push_back(
          slice(buffer, bucket.offsets[k], values[bucket.parameters[k]].sizes()));
    }
    try {
      std::shared_ptr<Future> result =
          options.commHook ? options.commHook(*group, view) : allreduceHook(*group, view);
      C10D_CHECK(result != nullptr, InvalidArgument, "DistributedDataParallel: the comm hook ",
                 "returned no Future for bucket ", index);
      return result;
    } catch (...) {
      auto failed = std::make_shared<Future>();
      failed->setError(std::current_exception());
      return failed;
    }
  }

  // Waits for bucket index's reduction and returns where its average is: buffer, into which a
  // result elsewhere is copied; with buffer undefined (a transient bucket, released at launch)
  // the hook's result itself, undefined when the hook took the average elsewhere. The first error
  // is kept; a bucket never launched (an earlier one failed to) is an error too.
  Tensor collect(size_t index, const Tensor& buffer, std::exception_ptr& firstError) {
    const std::shared_ptr<Future>& result = buckets[index].result;
    try {
      C10D_CHECK(result != nullptr, StateError, "DistributedDataParallel: bucket ", index,
                 " was not reduced because an earlier bucket's reduction failed to start");
      result->wait();
      const std::vector<Tensor>& value = result->value();
      if (!buffer.defined()) {
        if (value.empty()) return Tensor();
        C10D_CHECK(value[0].numel() == buckets[index].numel, InvalidArgument,
                   "DistributedDataParallel: the comm hook completed bucket ", index, " with ",
                   value[0].describe(), " but the bucket has ", buckets[index].numel,
                   " elements; complete with the bucket's average, or with no tensors");
        return value[0];
      }
      if (!value.empty() && value[0].data() != buffer.data()) copyTensor(buffer, value[0]);
      return buffer;
    } catch (...) {
      if (!firstError) firstError = std::current_exception();
      return Tensor();
    }
  }

  // Collective: how many ranks used each gradient in this backward (SUM of 0/1 per parameter).
  std::vector<int64_t> countUses(const std::vector<uint8_t>& used) {
    std::vector<int64_t> flags(used.begin(), used.end());
    return detail::onDevice(flags, commDevice,
                            [&](const Tensor& t) { group->allreduce(t)->wait(); });
  }

  // Collective, once, after the first backward: every rank takes rank 0's ready order.
  void rebuildOnce() {
    if (rebuilt) return;
    rebuilt = true;
    if (!options.rebuildBuckets) return;
    std::vector<int64_t> order;
    if (group->rank() == 0) {
      std::vector<uint8_t> seen(parameters.size(), 0);
      for (size_t i : readyOrder) {
        if (seen[i]) continue;
        order.push_back(static_cast<int64_t>(i));
        seen[i] = 1;
      }
      for (size_t k = parameters.size(); k-- > 0;) {
        if (!seen[k]) order.push_back(static_cast<int64_t>(k));
      }
    } else {
      order.assign(parameters.size(), 0);
    }
    if (worldSize() > 1) {
      order = detail::onDevice(order, commDevice,
                               [&](const Tensor& t) { group->broadcast(t)->wait(); });
    }
    readyOrder.clear();
    std::vector<size_t> newOrder(order.begin(), order.end());
    std::vector<std::vector<size_t>> current;
    for (const Bucket& bucket : buckets) current.push_back(bucket.parameters);
    if (detail::assignBuckets(values, newOrder, options.firstBucketBytes, options.bucketCapBytes) !=
        current) {
      build(newOrder);
    }
  }
};

// ---- the layout ----

namespace detail {

std::vector<std::vector<size_t>> assignBuckets(const std::vector<Tensor>& parameters,
                                               const std::vector<size_t>& order, size_t firstCap,
                                               size_t cap) {
  // One open bucket per kind (dtype and device), so each bucket holds one kind; a kind's first
  // bucket has the smaller cap.
  struct Open {
    std::vector<size_t> members;
    size_t bytes = 0;
    bool first = true;
  };
  std::map<std::pair<int, std::string>, Open> open;
  std::vector<std::vector<size_t>> buckets;
  for (size_t i : order) {
    const Tensor& p = parameters[i];
    Open& bucket = open[{static_cast<int>(p.dtype()), p.device().str()}];
    bucket.members.push_back(i);
    bucket.bytes += p.nbytes();
    if (bucket.bytes >= (bucket.first ? firstCap : cap)) {
      buckets.push_back(std::move(bucket.members));
      bucket = Open{{}, 0, false};
    }
  }
  // What is left, in the order of each kind's first member.
  std::vector<std::vector<size_t>> rest;
  for (auto& [kind, bucket] : open) {
    if (!bucket.members.empty()) rest.push_back(std::move(bucket.members));
  }
  std::vector<size_t> position(parameters.size());
  for (size_t k = 0; k < order.size(); ++k) position[order[k]] = k;
  std::sort(rest.begin(), rest.end(), [&](const auto& a, const auto& b) {
    return position[a.front()] < position[b.front()];
  });
  for (auto& bucket : rest) buckets.push_back(std::move(bucket));
  return buckets;
}

}  // namespace detail

// ---- hooks ----

std::shared_ptr<Future> allreduceHook(ProcessGroup& group, GradBucket& bucket) {
  return group.allreduce(bucket.buffer, {.reduceOp = bucket.average})->getFuture();
}

namespace {

template <typename Low>
std::shared_ptr<Future> compressHook(ProcessGroup& group, GradBucket& bucket, ScalarType low,
                                     const char* hook) {
  Tensor buffer = bucket.buffer;
  C10D_CHECK(buffer.device().isCPU() &&
                 (buffer.dtype() == ScalarType::Float32 || buffer.dtype() == ScalarType::Float64),
             InvalidArgument, "DistributedDataParallel: ", hook, " compresses CPU float32 or ",
             "float64 buckets; bucket ", bucket.index, " is ", buffer.describe());
  const int64_t n = buffer.numel();
  Tensor compressed = Tensor::empty({n}, low);
  // Divided while compressing, before the sum: the sum of averages fits where the sum might not.
  const double factor = bucket.average.factor();
  if (buffer.dtype() == ScalarType::Float32) {
    kernels::best().fromFloat(low, buffer.data<float>(), compressed.data<Low>(),
                              static_cast<size_t>(n), factor);
  } else {
    const double* in = buffer.data<double>();
    Low* out = compressed.data<Low>();
    for (int64_t k = 0; k < n; ++k) out[k] = Low(static_cast<float>(in[k] * factor));
  }
  return group.allreduce(compressed)->getFuture()->then([buffer, compressed, n, low](Future&) {
    const Low* in = compressed.data<Low>();
    if (buffer.dtype() == ScalarType::Float32) {
      kernels::best().toFloat(low, in, buffer.data<float>(), static_cast<size_t>(n));
    } else {
      double* out = buffer.data<double>();
      for (int64_t k = 0; k < n; ++k) out[k] = static_cast<float>(in[k]);
    }
    return std::vector<Tensor>{buffer};
  });
}

}  // namespace

std::shared_ptr<Future> fp16CompressHook(ProcessGroup& group, GradBucket& bucket) {
  return compressHook<Half>(group, bucket, ScalarType::Float16, "fp16CompressHook");
}

std::shared_ptr<Future> bf16CompressHook(ProcessGroup& group, GradBucket& bucket) {
  return compressHook<BFloat16>(group, bucket, ScalarType::BFloat16, "bf16CompressHook");
}

// ---- DistributedDataParallel ----

DistributedDataParallel::DistributedDataParallel(ProcessGroup& group,
                                                 std::vector<DataParallelParameter> parameters,
                                                 DataParallelOptions options)
    : impl_(std::make_unique<Impl>()) {
  C10D_CHECK(group.isMember(), InvalidArgument, "DistributedDataParallel: this rank is not a ",
             "member of group '", group.groupName(), "'");
  C10D_CHECK(!parameters.empty(), InvalidArgument, "DistributedDataParallel: no parameters");
  C10D_CHECK(options.firstBucketBytes > 0 && options.bucketCapBytes > 0, InvalidArgument,
             "DistributedDataParallel: bucket sizes must be positive, got first ",
             options.firstBucketBytes, " and cap ", options.bucketCapBytes, " bytes");
  std::map<const void*, size_t> owners;  // memory -> the parameter (or gradient) that uses it
  for (size_t i = 0; i < parameters.size(); ++i) {
    const DataParallelParameter& p = parameters[i];
    auto where = [&] {
      return "DistributedDataParallel: parameter " + describeParameter(i, p.name);
    };
    C10D_CHECK(p.value.defined(), InvalidArgument, where(), " is undefined");
    C10D_CHECK(isFloatingPoint(p.value.dtype()), InvalidArgument, where(), " is ",
               p.value.describe(),
               "; gradients are averaged, so parameters must be floating point");
    C10D_CHECK(p.value.isContiguous(), InvalidArgument, where(), " is ", p.value.describe(),
               "; register contiguous parameters");
    group.backend(p.value.device().type);  // throws naming the device the group cannot serve
    if (options.gradientAsBucketView) {
      C10D_CHECK(!p.grad.defined(), InvalidArgument, where(), " comes with a gradient tensor, ",
                 "but with gradientAsBucketView the reducer owns the gradients (gradient(i))");
      C10D_CHECK(!options.transientBuckets, InvalidArgument,
                 "DistributedDataParallel: gradientAsBucketView keeps the gradients in the "
                 "buckets, so they cannot be transientBuckets; set one of the two");
    } else {
      C10D_CHECK(p.grad.defined(), InvalidArgument, where(),
                 " has no gradient tensor (give one, or set gradientAsBucketView)");
      C10D_CHECK(p.grad.dtype() == p.value.dtype() && p.grad.device() == p.value.device() &&
                     p.grad.numel() == p.value.numel() && p.grad.isContiguous(),
                 InvalidArgument, where(), " is ", p.value.describe(), " but its gradient is ",
                 p.grad.describe(), "; they must match and the gradient must be contiguous");
    }
    for (const Tensor* t : {&p.value, &p.grad}) {
      if (!t->defined() || t->nbytes() == 0) continue;
      auto [it, fresh] = owners.emplace(t->data(), i);
      C10D_CHECK(fresh, InvalidArgument, "DistributedDataParallel: parameter ",
                 describeParameter(i, p.name), " shares its memory with parameter ",
                 describeParameter(it->second, parameters[it->second].name),
                 "; register each parameter once, each with a gradient of its own");
    }
  }
  Impl& impl = *impl_;
  impl.group = &group;
  impl.options = std::move(options);
  impl.parameters = std::move(parameters);
  for (const auto& p : impl.parameters) impl.values.push_back(p.value);
  impl.commDevice = impl.values.front().device();
  impl.markedUnsynced.assign(impl.parameters.size(), 0);
  // Backward produces the last layers' gradients first: the initial order is the reverse of
  // registration, until the first backward shows the real one.
  std::vector<size_t> order(impl.parameters.size());
  std::iota(order.rbegin(), order.rend(), size_t{0});
  impl.build(order);
}

DistributedDataParallel::~DistributedDataParallel() {
  // Collectives still in flight write into the buckets: wait for them (each ends by its own
  // timeout; the group's bounds a hook's Future that never would) before freeing.
  for (Bucket& bucket : impl_->buckets) {
    if (!bucket.result) continue;
    try {
      bucket.result->waitFor(impl_->group->timeout());
    } catch (...) {
    }
  }
}

size_t DistributedDataParallel::parameterCount() const {
  return impl_->parameters.size();
}

std::string parameterName(const DataParallelParameter& parameter, size_t index) {
  return parameter.name.empty() ? "param" + std::to_string(index) : parameter.name;
}

std::string DistributedDataParallel::parameterName(size_t i) const {
  C10D_CHECK(i < impl_->parameters.size(), InvalidArgument,
             "DistributedDataParallel: parameterName(", i, ") of ", impl_->parameters.size(),
             " parameters");
  return c10d::parameterName(impl_->parameters[i], i);
}

void DistributedDataParallel::addToState(checkpoint::State& state,
                                         const std::string& prefix) const {
  for (size_t i = 0; i < impl_->parameters.size(); ++i) {
    state.add(prefix + parameterName(i), impl_->parameters[i].value);
  }
}

Tensor DistributedDataParallel::parameter(size_t i) const {
  C10D_CHECK(i < impl_->parameters.size(), InvalidArgument, "DistributedDataParallel: parameter(",
             i, ") of ", impl_->parameters.size(), " parameters");
  return impl_->parameters[i].value;
}

Tensor DistributedDataParallel::gradient(size_t i) const {
  C10D_CHECK(i < impl_->parameters.size(), InvalidArgument, "DistributedDataParallel: gradient(", i,
             ") of ", impl_->parameters.size(), " parameters");
  return impl_->options.gradientAsBucketView ? impl_->slots[i].view : impl_->parameters[i].grad;
}

std::vector<std::vector<size_t>> DistributedDataParallel::bucketLayout() const {
  std::vector<std::vector<size_t>> layout;
  for (const Bucket& bucket : impl_->buckets) layout.push_back(bucket.parameters);
  return layout;
}

void DistributedDataParallel::syncParameters(const std::vector<Tensor>& buffers, int root) {
  Impl& impl = *impl_;
  ProcessGroup& group = *impl.group;
  C10D_CHECK(root >= 0 && root < group.size(), InvalidArgument,
             "DistributedDataParallel: syncParameters root ", root, " is not a rank of a group of ",
             group.size());
  // What this rank registered: count, then dtype, rank and sizes of each tensor.
  std::vector<Tensor> tensors = impl.values;
  tensors.insert(tensors.end(), buffers.begin(), buffers.end());
  std::vector<int64_t> mine = {static_cast<int64_t>(impl.values.size()),
                               static_cast<int64_t>(buffers.size())};
  for (const Tensor& t : tensors) {
    C10D_CHECK(t.defined() && t.isContiguous(), InvalidArgument,
               "DistributedDataParallel: syncParameters needs defined, contiguous buffers");
    mine.push_back(static_cast<int64_t>(t.dtype()));
    // Devices too: a CPU tensor here and a CUDA one there would go to different backends.
    mine.push_back(static_cast<int64_t>(t.device().type) * 1000 + t.device().index);
    mine.push_back(t.dim());
    mine.insert(mine.end(), t.sizes().begin(), t.sizes().end());
  }
  const int size = group.size();
  if (size > 1) {
    std::vector<std::vector<int64_t>> all = detail::allgatherValues(group, mine, impl.commDevice);
    auto described = [&](int r) { return all[r]; };
    const std::vector<int64_t> reference = described(root);
    for (int r = 0; r < size; ++r) {
      std::vector<int64_t> theirs = described(r);
      if (theirs == reference) continue;
      C10D_CHECK(theirs[0] == reference[0] && theirs[1] == reference[1], InvalidArgument,
                 "DistributedDataParallel: rank ", r, " registered ", theirs[0], " parameters and ",
                 theirs[1], " buffers, rank ", root, " ", reference[0], " and ", reference[1],
                 "; every rank must register the same model");
      // Walk both descriptions to the first tensor that differs.
      size_t a = 2, b = 2;
      for (size_t k = 0; k < tensors.size(); ++k) {
        auto next = [](const std::vector<int64_t>& d, size_t& at) {
          std::vector<int64_t> one(d.begin() + at, d.begin() + at + 3 + d[at + 2]);
          at += one.size();
          return one;
        };
        std::vector<int64_t> x = next(theirs, a), y = next(reference, b);
        if (x == y) continue;
        auto text = [](const std::vector<int64_t>& d) {
          std::string sizes;
          for (size_t s = 3; s < d.size(); ++s) sizes += (s > 3 ? ", " : "") + std::to_string(d[s]);
          Device device{static_cast<DeviceType>(d[1] / 1000), static_cast<int>(d[1] % 1000)};
          return detail::concat(static_cast<ScalarType>(d[0]), "[", sizes, "]",
                                device.isCPU() ? "" : " on " + device.str());
        };
        std::string what = k < impl.values.size()
                               ? "parameter " + describeParameter(k, impl.parameters[k].name)
                               : "buffer " + std::to_string(k - impl.values.size());
        C10D_THROW(InvalidArgument, "DistributedDataParallel: ", what, " is ", text(x), " on rank ",
                   r, " but ", text(y), " on rank ", root,
                   "; every rank must register the same model");
      }
    }
  }
  if (size == 1) return;
  // One broadcast per kind, in the order of each kind's first tensor.
  std::vector<std::pair<std::pair<ScalarType, std::string>, std::vector<size_t>>> kinds;
  for (size_t k = 0; k < tensors.size(); ++k) {
    auto key = std::make_pair(tensors[k].dtype(), tensors[k].device().str());
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](auto& e) { return e.first == key; });
    if (it == kinds.end()) {
      kinds.push_back({key, {k}});
    } else {
      it->second.push_back(k);
    }
  }
  for (const auto& [kind, members] : kinds) {
    int64_t numel = 0;
    for (size_t k : members) numel += tensors[k].numel();
    const Tensor& first = tensors[members.front()];
    Tensor flat = Tensor::empty({numel}, first.dtype(), first.device());
    int64_t offset = 0;
    for (size_t k : members) {
      Tensor part = slice(flat, offset, tensors[k].sizes());
      if (group.rank() == root) copyTensor(part, tensors[k]);
      offset += tensors[k].numel();
    }
    group.broadcast(flat, {.rootRank = root})->wait();
    if (group.rank() == root) continue;
    offset = 0;
    for (size_t k : members) {
      copyTensor(tensors[k], slice(flat, offset, tensors[k].sizes()));
      offset += tensors[k].numel();
    }
  }
}

void DistributedDataParallel::prepareForBackward(int activeRanks) {
  Impl& impl = *impl_;
  C10D_CHECK(activeRanks == -1 || (activeRanks >= 1 && activeRanks <= impl.worldSize()),
             InvalidArgument, "DistributedDataParallel: prepareForBackward(", activeRanks,
             ") in a group of ", impl.worldSize(), " ranks");
  // A rank that joined shadows every backward's collectives; one that skips them (noSync) would
  // leave it waiting in a bucket's allreduce.
  C10D_CHECK(!(impl.noSync.load() > 0 && activeRanks != -1 && activeRanks < impl.worldSize()),
             InvalidArgument,
             "DistributedDataParallel: a no-sync backward while ranks have joined ", "(",
             activeRanks, " of ", impl.worldSize(), " active): the joined ranks shadow every ",
             "backward's collectives; reduce every backward while ranks run out of data");
  std::lock_guard<std::mutex> guard(impl.mutex);
  impl.activeRanks = activeRanks;
}

void DistributedDataParallel::markGradReady(size_t i) {
  Impl& impl = *impl_;
  C10D_CHECK(i < impl.parameters.size(), InvalidArgument, "DistributedDataParallel: markGradReady(",
             i, ") but ", impl.parameters.size(), " parameters are registered");
  bool syncing;
  Tensor view;  // where the gradient goes in its bucket
  {
    std::lock_guard<std::mutex> guard(impl.mutex);
    C10D_CHECK(!impl.marked[i], InvalidArgument, "DistributedDataParallel: parameter ",
               describeParameter(i, impl.parameters[i].name),
               " was marked ready twice in one backward");
    // Whether this backward reduces is decided once, at its first mark, so a NoSync scope that
    // opens or closes mid-backward cannot split it.
    if (impl.syncing < 0) impl.syncing = impl.noSync.load() == 0 ? 1 : 0;
    impl.marked[i] = 1;
    impl.finalized = false;
    syncing = impl.syncing == 1;
    if (syncing && !impl.rebuilt) impl.readyOrder.push_back(i);
    if (syncing && impl.worldSize() > 1 && !impl.options.gradientAsBucketView) {
      impl.ensureBuffer(impl.slots[i].bucket);
      view = impl.slots[i].view;
    }
  }
  // Without peers, or while gradients accumulate locally, there is nothing to send yet.
  if (!syncing || impl.worldSize() == 1) return;
  const Impl::Slot& slot = impl.slots[i];
  if (!impl.options.gradientAsBucketView) {
    try {
      copyTensor(view, impl.parameters[i].grad);
    } catch (...) {
      std::lock_guard<std::mutex> guard(impl.mutex);
      impl.marked[i] = 0;  // not ready after all: the caller may mark it again
      throw;
    }
  }
  std::unique_lock<std::mutex> lock(impl.mutex);
  if (--impl.buckets[slot.bucket].pending == 0) impl.launchReady(lock);
}

bool DistributedDataParallel::finalizeBackward() {
  Impl& impl = *impl_;
  std::vector<uint8_t> used;
  std::map<size_t, Tensor> saved;  // view mode: a locally unused gradient, kept aside
  {
    std::unique_lock<std::mutex> lock(impl.mutex);
    C10D_CHECK(!impl.finalized, InvalidArgument, "DistributedDataParallel: finalizeBackward ",
               "called again without a gradient marked ready since the last one");
    if (impl.syncing < 0) impl.syncing = impl.noSync.load() == 0 ? 1 : 0;
    // Gradients this rank produced in the no-sync backwards before count as used here too.
    for (size_t i = 0; i < impl.marked.size(); ++i) impl.markedUnsynced[i] |= impl.marked[i];
    if (impl.syncing == 0) {
      impl.resetBackward();
      impl.finalized = true;
      return false;
    }
    used = impl.markedUnsynced;
    if (impl.worldSize() > 1) {
      for (size_t i = 0; i < used.size(); ++i) {
        if (impl.marked[i]) continue;
        impl.ensureBuffer(impl.slots[i].bucket);
        const Impl::Slot& slot = impl.slots[i];
        if (used[i]) {
          // Accumulated in an earlier no-sync backward only: it joins the reduction as it is.
          if (!impl.options.gradientAsBucketView) copyTensor(slot.view, impl.parameters[i].grad);
        } else {
          // Not produced here: zeros, unless no rank produced it (then it is put back).
          if (impl.options.gradientAsBucketView) {
            Tensor copy = Tensor::empty(slot.view.sizes(), slot.view.dtype(), slot.view.device());
            copyTensor(copy, slot.view);
            saved[i] = copy;
          }
          zeroFill(slot.view);
        }
        --impl.buckets[slot.bucket].pending;
      }
      impl.launchReady(lock);
    }
  }
  std::exception_ptr error;
  std::vector<int64_t> uses(used.begin(), used.end());
  std::vector<Tensor> averages(impl.buckets.size());
  if (impl.worldSize() > 1) {
    for (size_t b = 0; b < impl.buckets.size(); ++b) {
      averages[b] = impl.collect(b, impl.buckets[b].buffer, error);
    }
    if (!error) {
      try {
        uses = impl.countUses(used);
      } catch (...) {
        error = std::current_exception();
      }
    }
  }
  const int contributors = impl.activeRanks > 0 ? impl.activeRanks : impl.worldSize();
  if (!error && impl.worldSize() > 1) {
    for (size_t i = 0; i < uses.size(); ++i) {
      if (uses[i] == 0) {
        // Unused everywhere: the gradient stays as the framework left it.
        if (auto it = saved.find(i); it != saved.end()) copyTensor(impl.slots[i].view, it->second);
        continue;
      }
      const Impl::Slot& slot = impl.slots[i];
      // Undefined: the hook took this bucket's average elsewhere.
      if (!impl.options.gradientAsBucketView && averages[slot.bucket].defined()) {
        copyTensor(impl.parameters[i].grad,
                   slice(averages[slot.bucket], slot.offset, impl.values[i].sizes()));
      }
    }
    try {
      impl.rebuildOnce();
    } catch (...) {
      error = std::current_exception();
    }
  } else if (!error) {
    impl.rebuilt = true;  // alone, the layout does not matter
  }
  {
    std::lock_guard<std::mutex> guard(impl.mutex);
    impl.resetBackward();
    impl.markedUnsynced.assign(impl.parameters.size(), 0);
    impl.finalized = true;
  }
  if (error) std::rethrow_exception(error);
  if (impl.options.findUnusedParameters) return true;
  std::string missing;
  for (size_t i = 0; i < uses.size(); ++i) {
    if (uses[i] >= contributors) continue;
    missing +=
        detail::concat(missing.empty() ? "" : ", ", describeParameter(i, impl.parameters[i].name),
                       " (ready on ", uses[i], " of ", contributors, " ranks)");
  }
  C10D_CHECK(missing.empty(), InvalidArgument,
             "DistributedDataParallel: finalizeBackward: gradients never marked ready: ", missing,
             "; mark every gradient in every backward, or set findUnusedParameters");
  return true;
}

void DistributedDataParallel::shadowBackward() {
  Impl& impl = *impl_;
  if (impl.worldSize() == 1) return;
  std::exception_ptr error;
  std::vector<Tensor> zeros;
  {
    std::lock_guard<std::mutex> guard(impl.mutex);
    C10D_CHECK(impl.syncing < 0, InvalidArgument, "DistributedDataParallel: shadowBackward ",
               "during a backward (gradients were marked ready since the last finalizeBackward)");
  }
  for (size_t b = 0; b < impl.buckets.size(); ++b) {
    const Bucket& bucket = impl.buckets[b];
    zeros.push_back(zeroTensor(bucket.numel, bucket.dtype, bucket.device));
    impl.buckets[b].result = impl.runHook(b, zeros.back(), /*shadow=*/true);
  }
  for (size_t b = 0; b < impl.buckets.size(); ++b) impl.collect(b, zeros[b], error);
  if (!error) {
    try {
      impl.countUses(std::vector<uint8_t>(impl.parameters.size(), 0));
      impl.rebuildOnce();
    } catch (...) {
      error = std::current_exception();
    }
  }
  std::lock_guard<std::mutex> guard(impl.mutex);
  impl.resetBackward();
  if (error) std::rethrow_exception(error);
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(ddp) {
  ddp_.impl_->noSync.fetch_add(1);
}

DistributedDataParallel::NoSync::~NoSync() {
  ddp_.impl_->noSync.fetch_sub(1);
}

}  // namespace c10d::inline v1
