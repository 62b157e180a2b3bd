#pragma once

// What a checkpoint holds: named tensors, each a global tensor (shape, dtype) of which every rank
// holds zero or more slices, and small named values (step, sampler position, RNG state, user
// bytes). A program builds one State per save or load from its own tensors and from the
// library's pieces (ZeroOptimizer::addToState, FullyShardedLayers::addToState, ...); the State
// only refers to the tensors' memory, so a load writes straight into them.
//
//   c10d::checkpoint::State state;
//   zero.addToState(state, "model.");           // parameters and Adam's moments, as slices
//   state.add("head.bias", bias);                // a whole tensor this rank holds
//   state.addSlice("embed", mine, {50257, 768}, Slice::rows(first, count, {50257, 768}));
//   state.setInt("step", step);
//
// A tensor added by several ranks with the same slice is replicated: a save writes it once. The
// slices of one tensor, over all ranks, must cover it without partial overlaps.
//
// Errors: InvalidArgument, naming the tensor, for a name holding '@' or "__metadata__", the same
// slice of a name given twice, an undefined or
// non-contiguous tensor, a slice outside the global shape or of another element count than the
// local tensor. Threading: a plain value; not shared between threads while one changes it.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1::checkpoint {

/// Where a rank's local tensor lies in the global tensor: a box (an offset and a size per
/// dimension: whole tensors, row and column ranges of tensor-parallel layers) or a flat range
/// (elements [begin, begin + count) of the global tensor in row-major order: ZeroOptimizer's and
/// FullyShardedLayers' shards, which start anywhere in a row). The local tensor holds the slice's
/// elements in row-major order of the box, or in flat order.
struct Slice {
  enum class Kind { Box, Flat };
  Kind kind = Kind::Box;
  std::vector<int64_t> offsets;  ///< Box: one per dimension; Flat: {begin}
  std::vector<int64_t> sizes;    ///< Box: one per dimension; Flat: {count}

  static Slice whole(const std::vector<int64_t>& globalShape);
  static Slice box(std::vector<int64_t> offsets, std::vector<int64_t> sizes);
  /// Rows [first, first + count) of dimension 0, every other dimension whole.
  static Slice rows(int64_t first, int64_t count, const std::vector<int64_t>& globalShape);
  /// Columns [first, first + count) of the last dimension, every other dimension whole.
  static Slice columns(int64_t first, int64_t count, const std::vector<int64_t>& globalShape);
  static Slice flat(int64_t begin, int64_t count);

  int64_t numel() const;
  /// "whole", "[0:4, 8:16]", "flat[100:250]": for error messages and the inspect tool.
  std::string describe() const;
  bool operator==(const Slice&) const = default;
};

/// "[2, 3]", and with a dtype "float32[2, 3]": how errors and the inspect tool write shapes.
std::string shapeText(const std::vector<int64_t>& shape);
std::string shapeText(ScalarType dtype, const std::vector<int64_t>& shape);

/// One slice of one tensor, as State holds it.
struct StateTensor {
  std::string name;
  std::vector<int64_t> globalShape;
  Slice slice;
  Tensor local;  ///< contiguous; CPU or CUDA; slice.numel() elements of the global tensor's dtype
};

class State {
 public:
  /// tensor is the whole of global tensor name (on this rank; replicated if others add it too).
  void add(const std::string& name, const Tensor& tensor);
  /// local is slice where of global tensor name, of globalShape and local's dtype.
  void addSlice(const std::string& name, const Tensor& local, std::vector<int64_t> globalShape,
                Slice where);

  /// Small values. A value set on several ranks must be equal there (a save checks it); one a
  /// single rank sets is that rank's. A load replaces every value set here with the checkpoint's.
  void setValue(const std::string& name, std::string bytes);
  void setInt(const std::string& name, int64_t value);
  /// The value as set or loaded; nullopt when absent.
  std::optional<std::string> value(const std::string& name) const;
  /// The value as an integer; throws InvalidArgument when absent or not set by setInt.
  int64_t getInt(const std::string& name) const;

  /// Runs after a load has filled every tensor and value of this State, in the order added, with
  /// the State loaded (which may be a copy or a move of this one): how the library's pieces turn
  /// loaded values (an optimizer's step count, a sampler's place) back into their state.
  void onLoad(std::function<void(const State&)> hook);
  /// Runs as a save (or AsyncSaver::save) begins, before anything is read: how the library's
  /// pieces copy counts they keep outside tensors (an optimizer's steps) into the tensors added
  /// for them, so that a State built once saves what is current at each save.
  void beforeSave(std::function<void()> hook);

  const std::vector<StateTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& values() const { return values_; }
  std::map<std::string, std::string>& mutableValues() { return values_; }
  const std::vector<std::function<void(const State&)>>& loadHooks() const { return hooks_; }
  const std::vector<std::function<void()>>& saveHooks() const { return saveHooks_; }

 private:
  std::vector<StateTensor> tensors_;
  std::map<std::string, std::string> values_;
  std::vector<std::function<void(const State&)>> hooks_;
  std::vector<std::function<void()>> saveHooks_;
};

}  // namespace c10d::inline v1::checkpoint
