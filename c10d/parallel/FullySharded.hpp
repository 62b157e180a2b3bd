#pragma once

#include <memory>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/checkpoint/State.hpp"
#include "c10d/training/Optimizers.hpp"

namespace c10d::inline v1 {

/// ZeRO-3 / FSDP for a model given as a list of layers, each with its parameters as one flat
/// tensor: every rank stores only its shard of each layer (ceil(n / N) elements, the last padded),
/// with the gradient's shard and the optimizer's state for it. A layer's full parameters exist
/// only between gather() and release(): all-gathered before its forward and again before its
/// backward, the next layer's gather started asynchronously while this one computes (gather's
/// prefetch argument); a layer's gradient is reduce-scattered (averaged) into its shard as its
/// backward ends (reduceGradient); step() waits for those and steps every shard.
///
///   for (l = 0..L-1)   { Tensor w = fsdp.gather(l, l + 1); forward(l, w); fsdp.release(l); }
///   for (l = L-1..0)   { Tensor w = fsdp.gather(l, l - 1); Tensor g = backward(l, w);
///                        fsdp.reduceGradient(l, g); fsdp.release(l); }
///   fsdp.step();
///
/// Every rank makes the same calls in the same order (they are collectives). Errors:
/// InvalidArgument for a layer out of range, a gradient of the wrong size or dtype, a gather of a
/// layer already gathered; the group's errors. Threading: one thread.
class FullyShardedLayers {
 public:
  /// layers[l]: layer l's full initial parameters, flat (the same on every rank: e.g. made from
  /// one seed); only this rank's shard is kept. float32 or float64 CPU tensors.
  FullyShardedLayers(ProcessGroup& group, const std::vector<Tensor>& layers,
                     const OptimizerSpec& spec);
  ~FullyShardedLayers();

  size_t layers() const;
  /// Layer l's full parameters (waiting for a prefetch of it, else all-gathering them now);
  /// prefetch >= 0 starts all-gathering that layer's too.
  Tensor gather(size_t layer, int prefetch = -1);
  /// Drops layer l's full parameters (and a prefetch of it nobody used).
  void release(size_t layer);
  /// Layer l's full gradient on this rank: averaged over the ranks into this rank's shard,
  /// asynchronously. grad may be reused once step() returns.
  void reduceGradient(size_t layer, const Tensor& grad);
  /// Waits for the reductions and steps every layer's shard.
  void step();

  /// Adds this rank's shards to a checkpoint: layer l's parameters as a flat range of
  /// "<prefix>layer<l>" (shaped [elements]) and its optimizer state as the same range of
  /// "<prefix>optim.layer<l>.<buffer>", plus "<prefix>optim.layer<l>.step". A checkpoint loads at
  /// any world size, and into a program that holds each layer whole.
  void addToState(checkpoint::State& state, const std::string& prefix = "");

  /// What this rank holds now, and the most it held since construction (or resetPeak): shards of
  /// parameters and gradients, optimizer state, full layers gathered.
  size_t residentBytes() const;
  size_t peakBytes() const;
  void resetPeak();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace c10d::inline v1
