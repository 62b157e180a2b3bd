#include "c10d/parallel/FullySharded.hpp"

#include <algorithm>
#include <cstring>

#include "c10d/core/Exception.hpp"
#include "c10d/parallel/Shard.hpp"

namespace c10d::inline v1 {
namespace {

struct Layer {
  int64_t elements = 0;
  int64_t part = 0;  // ceil(elements / N)
  Tensor shard;      // this rank's part of the parameters (part elements)
  Tensor gradShard;  // its part of the averaged gradient
  Tensor gathering;  // N * part elements while gathered or being gathered
  std::shared_ptr<Work> pendingGather;
  Tensor reducing;  // the padded full gradient while its reduce-scatter runs
  std::shared_ptr<Work> pendingReduce;
  bool gathered = false;
};

}  // namespace

struct FullyShardedLayers::Impl {
  ProcessGroup* group = nullptr;
  std::vector<Layer> layers;
  std::unique_ptr<FunctionalOptimizer> optimizer;
  size_t peak = 0;

  Layer& at(size_t layer, const char* call) {
    C10D_CHECK(layer < layers.size(), InvalidArgument, "FullyShardedLayers::", call, ": layer ",
               layer, " is out of range (", layers.size(), " layers)");
    return layers[layer];
  }

  size_t resident() const {
    size_t bytes = optimizer->stateBytes();
    for (const Layer& l : layers) {
      bytes += l.shard.nbytes() + l.gradShard.nbytes();
      if (l.gathering.defined()) bytes += l.gathering.nbytes();
      if (l.reducing.defined()) bytes += l.reducing.nbytes();
    }
    return bytes;
  }

  void notePeak() { peak = std::max(peak, resident()); }

  void startGather(Layer& l) {
    if (l.gathering.defined()) return;  // already gathered or on its way
    l.gathering = Tensor::empty({l.part * group->size()}, l.shard.dtype());
    l.pendingGather = group->allgatherIntoTensor(l.gathering, l.shard);
    notePeak();
  }
};

FullyShardedLayers::FullyShardedLayers(ProcessGroup& group, const std::vector<Tensor>& layers,
                                       const OptimizerSpec& spec)
    : impl_(std::make_unique<Impl>()) {
  Impl& impl = *impl_;
  impl.group = &group;
  impl.optimizer = makeOptimizer(spec);
  const int size = group.size(), rank = group.rank();
  for (size_t i = 0; i < layers.size(); ++i) {
    const Tensor& full = layers[i];
    C10D_CHECK(full.defined() && full.device().isCPU() && full.isContiguous() &&
                   (full.dtype() == ScalarType::Float32 || full.dtype() == ScalarType::Float64),
               InvalidArgument, "FullyShardedLayers: layer ", i, " is ",
               full.defined() ? full.describe() : std::string("undefined"),
               "; it needs a contiguous float32 or float64 CPU tensor");
    Layer layer;
    layer.elements = full.numel();
    const detail::Shard mine = detail::shardOf(layer.elements, size, rank);
    layer.part = mine.part;
    layer.shard = Tensor::zeros({layer.part}, full.dtype());
    layer.gradShard = Tensor::zeros({layer.part}, full.dtype());
    std::memcpy(layer.shard.data(),
                static_cast<const char*>(full.data()) + mine.begin * full.elementSize(),
                mine.count * full.elementSize());
    impl.layers.push_back(std::move(layer));
  }
  impl.notePeak();
}

FullyShardedLayers::~FullyShardedLayers() = default;

size_t FullyShardedLayers::layers() const {
  return impl_->layers.size();
}

Tensor FullyShardedLayers::gather(size_t layer, int prefetch) {
  Impl& impl = *impl_;
  Layer& l = impl.at(layer, "gather");
  C10D_CHECK(!l.gathered, InvalidArgument, "FullyShardedLayers::gather: layer ", layer,
             " is gathered already; release it first");
  impl.startGather(l);
  // The next layer's gather goes on while this one computes.
  if (prefetch >= 0 && static_cast<size_t>(prefetch) < impl.layers.size()) {
    impl.startGather(impl.layers[static_cast<size_t>(prefetch)]);
  }
  l.pendingGather->wait();
  l.pendingGather.reset();
  l.gathered = true;
  // The full parameters are the first `elements` of the gathered parts (the rest is padding).
  return Tensor::fromBlob(l.gathering.data(), l.gathering.dtype(), {l.elements}, Device::cpu(), {},
                          l.gathering.holder());
}

void FullyShardedLayers::release(size_t layer) {
  Layer& l = impl_->at(layer, "release");
  if (l.pendingGather) l.pendingGather->wait();  // a prefetch nobody used still completes first
  l.pendingGather.reset();
  l.gathering = Tensor();
  l.gathered = false;
}

void FullyShardedLayers::reduceGradient(size_t layer, const Tensor& grad) {
  Impl& impl = *impl_;
  Layer& l = impl.at(layer, "reduceGradient");
  C10D_CHECK(grad.defined() && grad.numel() == l.elements && grad.dtype() == l.shard.dtype() &&
                 grad.isContiguous() && grad.device().isCPU(),
             InvalidArgument, "FullyShardedLayers::reduceGradient: layer ", layer, " has ",
             l.elements, " ", l.shard.dtype(), " parameters; the gradient is ",
             grad.defined() ? grad.describe() : std::string("undefined"));
  C10D_CHECK(!l.pendingReduce, InvalidArgument, "FullyShardedLayers::reduceGradient: layer ", layer,
             "'s gradient is already being reduced this step");
  l.reducing = Tensor::zeros({l.part * impl.group->size()}, grad.dtype());  // padded to N parts
  std::memcpy(l.reducing.data(), grad.data(), grad.nbytes());
  l.pendingReduce =
      impl.group->reduceScatterTensor(l.gradShard, l.reducing, {.reduceOp = ReduceOp::AVG});
  impl.notePeak();
}

void FullyShardedLayers::step() {
  Impl& impl = *impl_;
  std::vector<Tensor> shards, grads;
  for (size_t i = 0; i < impl.layers.size(); ++i) {
    Layer& l = impl.layers[i];
    // A layer without a gradient this step gets none: the optimizer leaves it alone.
    const bool reduced = l.pendingReduce != nullptr;
    if (reduced) {
      l.pendingReduce->wait();
      l.pendingReduce.reset();
      l.reducing = Tensor();
    }
    shards.push_back(l.shard);
    grads.push_back(reduced ? l.gradShard : Tensor());
  }
  impl.optimizer->step(shards, grads);
  impl.notePeak();
}

void FullyShardedLayers::addToState(checkpoint::State& state, const std::string& prefix) {
  Impl& impl = *impl_;
  const int size = impl.group->size(), rank = impl.group->rank();
  for (size_t i = 0; i < impl.layers.size(); ++i) {
    const Layer& l = impl.layers[i];
    const detail::Shard mine = detail::shardOf(l.elements, size, rank);
    if (mine.count == 0) continue;  // all padding: the other ranks hold the whole layer
    const std::string layer = "layer" + std::to_string(i);
    const std::string name = prefix + layer;
    const checkpoint::Slice where = checkpoint::Slice::flat(mine.begin, mine.count);
    state.addSlice(name,
                   Tensor::fromBlob(l.shard.data(), l.shard.dtype(), {mine.count}, Device::cpu(),
                                    {}, l.shard.holder()),
                   {l.elements}, where);
    addOptimizerState(state, *impl.optimizer, i, l.shard, prefix + "optim." + layer, {l.elements},
                      where);
  }
}

size_t FullyShardedLayers::residentBytes() const {
  return impl_->resident();
}
size_t FullyShardedLayers::peakBytes() const {
  return impl_->peak;
}
void FullyShardedLayers::resetPeak() {
  impl_->peak = impl_->resident();
}

}  // namespace c10d::inline v1
