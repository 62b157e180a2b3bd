#pragma once

/// \file
/// checkpoint::State: the named tensor slices and small values a checkpoint saves and loads.
///
/// What a checkpoint holds: named tensors, each a global tensor (shape, dtype) of which every rank
/// holds zero or more slices, and small named values (step, sampler position, RNG state, user
/// bytes). A program builds one State per save or load from its own tensors and from the
/// library's pieces (ZeroOptimizer::addToState, FullyShardedLayers::addToState, ...); the State
/// only refers to the tensors' memory, so a load writes straight into them.
///
/// \code
/// c10d::checkpoint::State state;
/// zero.addToState(state, "model.");           // parameters and Adam's moments, as slices
/// state.add("head.bias", bias);                // a whole tensor this rank holds
/// state.addSlice("embed", mine, {50257, 768}, Slice::rows(first, count, {50257, 768}));
/// state.setInt("step", step);
/// \endcode
///
/// A tensor added by several ranks with the same slice is replicated: a save writes it once. The
/// slices of one tensor, over all ranks, must cover it without partial overlaps.
///
/// Errors: InvalidArgument, naming the tensor, for a name holding '@' or "__metadata__", the same
/// slice of a name given twice, an undefined or
/// non-contiguous tensor, a slice outside the global shape or of another element count than the
/// local tensor. Threading: a plain value; not shared between threads while one changes it.

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
  /// How offsets and sizes are read: Box, an offset and a size per dimension of the global
  /// shape; Flat, one range of elements in row-major order (offsets {begin}, sizes {count}).
  enum class Kind { Box, Flat };
  Kind kind = Kind::Box;         ///< a box or a flat range
  std::vector<int64_t> offsets;  ///< Box: one per dimension; Flat: {begin}
  std::vector<int64_t> sizes;    ///< Box: one per dimension; Flat: {count}

  /// The whole tensor, as a box.
  /// \param globalShape the global tensor's shape.
  /// \return A box of zero offsets and sizes globalShape.
  static Slice whole(const std::vector<int64_t>& globalShape);
  /// A box. Checked against the global shape only when added to a State.
  /// \param offsets the first index in each dimension.
  /// \param sizes the extent in each dimension (as many as offsets).
  /// \return That box.
  static Slice box(std::vector<int64_t> offsets, std::vector<int64_t> sizes);
  /// Rows [first, first + count) of dimension 0, every other dimension whole.
  /// \param first the first row.
  /// \param count the number of rows.
  /// \param globalShape the global tensor's shape, of at least one dimension.
  /// \return That box.
  /// \throws InvalidArgument for a shape of no dimensions.
  static Slice rows(int64_t first, int64_t count, const std::vector<int64_t>& globalShape);
  /// Columns [first, first + count) of the last dimension, every other dimension whole.
  /// \param first the first column.
  /// \param count the number of columns.
  /// \param globalShape the global tensor's shape, of at least one dimension.
  /// \return That box.
  /// \throws InvalidArgument for a shape of no dimensions.
  static Slice columns(int64_t first, int64_t count, const std::vector<int64_t>& globalShape);
  /// Elements [begin, begin + count) of the global tensor, in row-major order.
  /// \param begin the first element.
  /// \param count the number of elements.
  /// \return That flat range.
  static Slice flat(int64_t begin, int64_t count);

  /// \return The number of elements the slice covers (the product of sizes).
  int64_t numel() const;
  /// "whole", "[0:4, 8:16]", "flat[100:250]": for error messages and the inspect tool.
  /// \return That text.
  std::string describe() const;
  /// \return Whether both have the same kind, offsets and sizes.
  bool operator==(const Slice&) const = default;
};

/// "[2, 3]", and with a dtype "float32[2, 3]": how errors and the inspect tool write shapes.
/// \param shape a shape.
/// \return The shape as text: "[2, 3]".
std::string shapeText(const std::vector<int64_t>& shape);
/// A shape with its dtype as text.
/// \param dtype the element type, written first.
/// \param shape a shape.
/// \return The text: "float32[2, 3]".
std::string shapeText(ScalarType dtype, const std::vector<int64_t>& shape);

/// One slice of one tensor, as State holds it.
struct StateTensor {
  std::string name;                  ///< the global tensor's name
  std::vector<int64_t> globalShape;  ///< the global tensor's shape
  Slice slice;                       ///< where local lies in the global tensor
  Tensor local;  ///< contiguous; CPU or CUDA; slice.numel() elements of the global tensor's dtype
};

/// A checkpoint's contents on this rank: tensor slices (referring to the program's memory),
/// values, and hooks run around a save or load. See the file's overview for the rules.
class State {
 public:
  /// tensor is the whole of global tensor name (on this rank; replicated if others add it too).
  /// \param name the tensor's name; not empty, without '@', not "__metadata__".
  /// \param tensor a defined, contiguous tensor (CPU or CUDA); referred to, not copied.
  /// \throws InvalidArgument as addSlice does.
  void add(const std::string& name, const Tensor& tensor);
  /// local is slice where of global tensor name, of globalShape and local's dtype.
  /// \param name the tensor's name; not empty, without '@', not "__metadata__".
  /// \param local this rank's slice: a defined, contiguous tensor (CPU or CUDA) of where.numel()
  ///        elements; referred to, not copied.
  /// \param globalShape the global tensor's shape; the same each time name is added.
  /// \param where where local lies in the global tensor; inside globalShape.
  /// \throws InvalidArgument for a bad name, an undefined or non-contiguous local, a slice outside
  ///         globalShape or of another element count than local, name added before with another
  ///         shape or dtype, or the same slice of name added twice.
  void addSlice(const std::string& name, const Tensor& local, std::vector<int64_t> globalShape,
                Slice where);

  /// Small values. A value set on several ranks must be equal there (a save checks it); one a
  /// single rank sets is that rank's. A load replaces every value set here with the checkpoint's.
  /// \param name the value's name; not empty. Setting it again replaces it.
  /// \param bytes any bytes.
  /// \throws InvalidArgument for an empty name.
  void setValue(const std::string& name, std::string bytes);
  /// Sets an integer value, which getInt reads back.
  /// \param name the value's name; not empty. Setting it again replaces it.
  /// \param value the integer.
  /// \throws InvalidArgument for an empty name.
  void setInt(const std::string& name, int64_t value);
  /// The value as set or loaded; nullopt when absent.
  /// \param name the value's name.
  /// \return Its bytes (setInt's in its own encoding), or nullopt.
  std::optional<std::string> value(const std::string& name) const;
  /// The value as an integer; throws InvalidArgument when absent or not set by setInt.
  /// \param name the value's name.
  /// \return The integer.
  /// \throws InvalidArgument when the value is absent or was not set by setInt.
  int64_t getInt(const std::string& name) const;

  /// Runs after a load has filled every tensor and value of this State, in the order added, with
  /// the State loaded (which may be a copy or a move of this one): how the library's pieces turn
  /// loaded values (an optimizer's step count, a sampler's place) back into their state.
  /// \param hook called with the State loaded; what it throws is thrown by the load.
  void onLoad(std::function<void(const State&)> hook);
  /// Runs as a save (or AsyncSaver::save) begins, before anything is read: how the library's
  /// pieces copy counts they keep outside tensors (an optimizer's steps) into the tensors added
  /// for them, so that a State built once saves what is current at each save.
  /// \param hook called with no arguments, in the order added; what it throws fails the save.
  void beforeSave(std::function<void()> hook);

  /// \return Every slice added, in the order added.
  const std::vector<StateTensor>& tensors() const { return tensors_; }
  /// \return Every value, by name (setInt's in its own encoding).
  const std::map<std::string, std::string>& values() const { return values_; }
  /// \return The values, for a load (or an elastic heal) to replace.
  std::map<std::string, std::string>& mutableValues() { return values_; }
  /// \return The hooks onLoad added, in the order added.
  const std::vector<std::function<void(const State&)>>& loadHooks() const { return hooks_; }
  /// \return The hooks beforeSave added, in the order added.
  const std::vector<std::function<void()>>& saveHooks() const { return saveHooks_; }

 private:
  std::vector<StateTensor> tensors_;
  std::map<std::string, std::string> values_;
  std::vector<std::function<void(const State&)>> hooks_;
  std::vector<std::function<void()>> saveHooks_;
};

}  // namespace c10d::inline v1::checkpoint
