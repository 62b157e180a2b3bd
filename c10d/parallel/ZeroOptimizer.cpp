#include "c10d/parallel/ZeroOptimizer.hpp"

#include <algorithm>
#include <cstring>
#include <deque>

#include "c10d/core/Exception.hpp"
#include "c10d/parallel/Shard.hpp"

namespace c10d::inline v1 {
namespace {

// A run of a bucket's flat elements that lies in one parameter.
struct Segment {
  size_t parameter;
  int64_t inParameter;  // offset in the parameter's elements
  int64_t inBucket;     // offset in the bucket's flat elements
  int64_t length;
};

// One bucket as the shards see it: its parameters' runs, and the part each rank owns.
struct BucketShards {
  std::vector<Segment> segments;  // every parameter of the bucket, in the bucket's order
  int64_t elements = 0;
  int64_t part = 0;  // ceil(elements / N): each rank's part, the last one's padded
  ScalarType dtype = ScalarType::Float32;
  Tensor values;  // this rank's part of the parameters (part elements)
  Tensor grads;   // its part of the averaged gradients (stage 2: the reduce-scatter's output)
};

// Parameter gathers in flight at once: each holds a bucket's worth of memory until its values
// are copied out; two let the next gather run while the last is copied out.
constexpr size_t kGathersInFlight = 2;

// Copies elements [from, from + count) of the bucket's flat order between the parameters (or
// their gradients) and flat, in the direction toFlat says.
void copyRange(const std::vector<Tensor>& tensors, const BucketShards& bucket, int64_t from,
               int64_t count, const Tensor& flat, int64_t flatOffset, bool toFlat) {
  const size_t element = c10d::elementSize(bucket.dtype);
  auto* flatBytes = static_cast<char*>(flat.data()) + flatOffset * element;
  for (const Segment& s : bucket.segments) {
    const int64_t begin = std::max(from, s.inBucket);
    const int64_t end = std::min(from + count, s.inBucket + s.length);
    if (begin >= end) continue;
    auto* tensorBytes = static_cast<char*>(tensors[s.parameter].data()) +
                        (s.inParameter + begin - s.inBucket) * element;
    char* flatAt = flatBytes + (begin - from) * element;
    if (toFlat) {
      std::memcpy(flatAt, tensorBytes, (end - begin) * element);
    } else {
      std::memcpy(tensorBytes, flatAt, (end - begin) * element);
    }
  }
}

}  // namespace

struct ZeroOptimizer::Impl {
  ProcessGroup* group = nullptr;
  int stage = 2;
  std::vector<std::string> names;
  std::vector<Tensor> values;
  std::vector<Tensor> grads;
  std::vector<BucketShards> buckets;
  std::unique_ptr<DistributedDataParallel> reducer;
  std::unique_ptr<FunctionalOptimizer> optimizer;
};

ZeroOptimizer::ZeroOptimizer(ProcessGroup& group, std::vector<DataParallelParameter> parameters,
                             const OptimizerSpec& spec, ZeroOptions options)
    : impl_(std::make_unique<Impl>()) {
  C10D_CHECK(options.stage == 1 || options.stage == 2, InvalidArgument, "ZeroOptimizer: stage ",
             options.stage, " is not 1 or 2 (stage 3 is FSDP)");
  Impl& impl = *impl_;
  impl.group = &group;
  impl.stage = options.stage;
  impl.optimizer = makeOptimizer(spec);
  for (const DataParallelParameter& p : parameters) {
    C10D_CHECK(p.grad.defined(), InvalidArgument, "ZeroOptimizer: parameter '", p.name,
               "' has no gradient tensor; the shards are read from the registered gradients");
    impl.names.push_back(parameterName(p, impl.names.size()));
    impl.values.push_back(p.value);
    impl.grads.push_back(p.grad);
  }
  DataParallelOptions ddp;
  ddp.firstBucketBytes = options.firstBucketBytes;
  ddp.bucketCapBytes = options.bucketCapBytes;
  ddp.rebuildBuckets = false;  // the shards are parts of buckets: they must not move
  const int size = group.size(), rank = group.rank();
  if (options.stage == 2) {
    // Each bucket's average is reduce-scattered straight into this rank's part of the shard. The
    // hook's Future completes with no tensors, so the reducer's transient bucket is freed once
    // the reduce-scatter is done and nothing is copied back into the gradients: gradient memory
    // is the shard's 1/N plus the buckets in flight.
    ddp.transientBuckets = true;
    Impl* state = &impl;
    ddp.commHook = [state, size, rank](ProcessGroup& pg, GradBucket& bucket) {
      const int64_t n = bucket.buffer.numel();
      const int64_t part = detail::shardOf(n, size, rank).part;
      Tensor input = bucket.buffer;
      if (n != part * size) {  // padded to N equal parts
        input = Tensor::zeros({part * size}, bucket.buffer.dtype());
        std::memcpy(input.data(), bucket.buffer.data(), bucket.buffer.nbytes());
      }
      // A joined rank's shadow backward steps nothing: its shard keeps the last average.
      Tensor mine = bucket.shadow ? Tensor::empty({part}, bucket.buffer.dtype())
                                  : state->buckets.at(bucket.index).grads;
      auto work = pg.reduceScatterTensor(mine, input, {.reduceOp = bucket.average});
      return work->getFuture()->then([](Future&) { return std::vector<Tensor>{}; });
    };
  }
  impl.reducer = std::make_unique<DistributedDataParallel>(group, std::move(parameters), ddp);
  for (const std::vector<size_t>& indices : impl.reducer->bucketLayout()) {
    BucketShards bucket;
    bucket.dtype = impl.values[indices.at(0)].dtype();
    for (size_t i : indices) {
      C10D_CHECK(impl.values[i].dtype() == bucket.dtype, InvalidArgument,
                 "ZeroOptimizer: a bucket mixes ", bucket.dtype, " and ", impl.values[i].dtype());
      bucket.segments.push_back({i, 0, bucket.elements, impl.values[i].numel()});
      bucket.elements += impl.values[i].numel();
    }
    bucket.part = detail::shardOf(bucket.elements, size, rank).part;
    bucket.values = Tensor::zeros({bucket.part}, bucket.dtype);
    bucket.grads = Tensor::zeros({bucket.part}, bucket.dtype);
    impl.buckets.push_back(std::move(bucket));
  }
}

ZeroOptimizer::~ZeroOptimizer() = default;

DistributedDataParallel& ZeroOptimizer::reducer() {
  return *impl_->reducer;
}

bool ZeroOptimizer::step() {
  Impl& impl = *impl_;
  if (!impl.reducer->finalizeBackward()) return false;
  const int rank = impl.group->rank();
  std::vector<Tensor> values, grads;
  for (BucketShards& bucket : impl.buckets) {
    const detail::Shard mine = detail::shardOf(bucket.elements, impl.group->size(), rank);
    copyRange(impl.values, bucket, mine.begin, mine.count, bucket.values, 0, true);
    // Stage 2's reduce-scatter left the averaged part in bucket.grads already; alone, the
    // reducer runs no hook and the gradients are their own average.
    if (impl.stage == 1 || impl.group->size() == 1) {
      copyRange(impl.grads, bucket, mine.begin, mine.count, bucket.grads, 0, true);
    }
    values.push_back(bucket.values);
    grads.push_back(bucket.grads);
  }
  // One state per bucket part; the padding past a bucket's end steps zeros and is never read.
  impl.optimizer->step(values, grads);
  struct Gather {
    const BucketShards* bucket;
    Tensor gathered;  // N * part elements: everyone's updated parts
    std::shared_ptr<Work> work;
  };
  std::deque<Gather> gathers;
  auto copyOutOldest = [&] {
    Gather oldest = std::move(gathers.front());
    gathers.pop_front();
    oldest.work->wait();
    copyRange(impl.values, *oldest.bucket, 0, oldest.bucket->elements, oldest.gathered, 0, false);
  };
  const int size = impl.group->size();
  for (const BucketShards& bucket : impl.buckets) {
    Tensor gathered = Tensor::empty({bucket.part * size}, bucket.dtype);
    gathers.push_back(
        {&bucket, gathered, impl.group->allgatherIntoTensor(gathered, bucket.values)});
    if (gathers.size() >= kGathersInFlight) copyOutOldest();
  }
  while (!gathers.empty()) copyOutOldest();
  return true;
}

size_t ZeroOptimizer::optimizerStateBytes() const {
  return impl_->optimizer->stateBytes();
}

void ZeroOptimizer::addToState(checkpoint::State& state, const std::string& prefix) {
  Impl& impl = *impl_;
  for (size_t i = 0; i < impl.values.size(); ++i) state.add(prefix + impl.names[i], impl.values[i]);
  const int size = impl.group->size(), rank = impl.group->rank();
  for (size_t b = 0; b < impl.buckets.size(); ++b) {
    const BucketShards& bucket = impl.buckets[b];
    const detail::Shard mine = detail::shardOf(bucket.elements, size, rank);
    // The part's state is one flat run of the bucket: each parameter it touches gets the piece
    // that lies in it, as a flat range of that parameter.
    for (const Segment& s : bucket.segments) {
      const int64_t begin = std::max(mine.begin, s.inBucket);
      const int64_t end = std::min(mine.begin + mine.count, s.inBucket + s.length);
      if (begin >= end) continue;
      addOptimizerState(state, *impl.optimizer, b, bucket.values,
                        prefix + "optim." + impl.names[s.parameter],
                        impl.values[s.parameter].sizes(),
                        checkpoint::Slice::flat(s.inParameter + begin - s.inBucket, end - begin),
                        begin - mine.begin);
    }
  }
}

int64_t ZeroOptimizer::shardElements() const {
  int64_t elements = 0;
  const int rank = impl_->group->rank();
  for (const BucketShards& bucket : impl_->buckets) {
    elements += detail::shardOf(bucket.elements, impl_->group->size(), rank).count;
  }
  return elements;
}

}  // namespace c10d::inline v1
