#pragma once

/// \file
/// FullyShardedLayers: ZeRO-3 / FSDP over a list of flat layers, each rank holding a shard of each.

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
  /// \param group the ranks that shard the layers; must outlive this object.
  /// \param layers every layer's full parameters: defined, contiguous float32 or float64 CPU
  ///        tensors (copied: this rank's shard is taken, the tensors are not kept).
  /// \param spec the optimizer that steps every shard (makeOptimizer).
  /// \throws InvalidArgument for a layer of another kind of tensor, or a bad optimizer spec.
  FullyShardedLayers(ProcessGroup& group, const std::vector<Tensor>& layers,
                     const OptimizerSpec& spec);
  ~FullyShardedLayers();

  /// \return The number of layers.
  size_t layers() const;
  /// Layer l's full parameters (waiting for a prefetch of it, else all-gathering them now);
  /// prefetch >= 0 starts all-gathering that layer's too.
  /// \param layer the layer l, in [0, layers()); it must not be gathered already.
  /// \param prefetch a layer whose all-gather to start now, without waiting for it; -1 (or any
  ///        value out of range) for none.
  /// \return Layer l's full parameters, flat ([elements], its dtype): a view of the gathered
  ///         buffer, which it keeps alive (drop it at release(l) to free that memory); writes to
  ///         it change no shard.
  /// \throws InvalidArgument for a layer out of range or gathered already.
  Tensor gather(size_t layer, int prefetch = -1);
  /// Drops layer l's full parameters (and a prefetch of it nobody used).
  /// \param layer the layer l, in [0, layers()); releasing one neither gathered nor prefetched
  ///        does nothing.
  /// \throws InvalidArgument for a layer out of range.
  void release(size_t layer);
  /// Layer l's full gradient on this rank: averaged over the ranks into this rank's shard,
  /// asynchronously. grad may be reused once step() returns.
  /// \param layer the layer l, in [0, layers()); at most once per step.
  /// \param grad the gradient of layer l's full parameters on this rank: a contiguous CPU tensor
  ///        of the layer's element count and dtype.
  /// \throws InvalidArgument for a layer out of range, a gradient of the wrong size, dtype or
  ///         kind, or a second gradient for the layer in one step.
  void reduceGradient(size_t layer, const Tensor& grad);
  /// Waits for the reductions and steps every layer's shard. A layer given no gradient this
  /// step is left as it is.
  void step();

  /// Adds this rank's shards to a checkpoint: layer l's parameters as a flat range of
  /// "<prefix>layer<l>" (shaped [elements]) and its optimizer state as the same range of
  /// "<prefix>optim.layer<l>.<buffer>", plus "<prefix>optim.layer<l>.step". A checkpoint loads at
  /// any world size, and into a program that holds each layer whole.
  /// \param state the checkpoint state to add to; it refers to this object's shards, so this
  ///        object must outlive its save or load.
  /// \param prefix put before every tensor's name; empty for none.
  void addToState(checkpoint::State& state, const std::string& prefix = "");

  /// What this rank holds now, and the most it held since construction (or resetPeak): shards of
  /// parameters and gradients, optimizer state, full layers gathered.
  /// \return The bytes this rank holds now.
  size_t residentBytes() const;
  /// \return The most bytes this rank held since construction or the last resetPeak().
  size_t peakBytes() const;
  /// Starts the peak over from what this rank holds now.
  void resetPeak();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace c10d::inline v1
