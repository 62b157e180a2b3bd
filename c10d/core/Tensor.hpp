#pragma once

/// \file
/// Tensor, the strided view of typed device memory every op takes, and its DLPack import and
/// export.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "c10d/core/Device.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/ScalarType.hpp"

struct DLManagedTensor;

namespace c10d::inline v1 {

/// A strided view of typed memory on a device: data pointer, dtype, sizes, strides (in
/// elements) and device. A Tensor may own its memory through a holder shared by every copy of
/// the Tensor; the memory is released when the last copy goes away. Copies are shallow: they
/// alias the same memory, like torch.Tensor.
///
/// Threading: a Tensor object is a value type; distinct copies may be used from distinct
/// threads. The memory itself is not synchronised: the caller orders reads and writes.
///
/// Copying a Tensor allocates nothing: copies share one immutable shape (sizes and strides) as
/// they share the memory's holder. A 4 B collective copied its tensor about six times on its way
/// to the wire, two heap allocations each (issue 32).
class Tensor {
 public:
  Tensor() = default;  ///< undefined: defined() is false, no data, no elements

  /// Wraps memory the caller keeps alive (or that holder keeps alive, when given). Empty strides
  /// mean contiguous row-major. Throws InvalidArgument on a null pointer with elements, a
  /// negative size, or strides of the wrong rank.
  /// \param data The first element; may be null only when sizes hold no element.
  /// \param dtype The element type.
  /// \param sizes The size of each dimension, each >= 0 (empty: a scalar of one element).
  /// \param device Where data lives; not checked against the pointer.
  /// \param strides Each dimension's stride in elements, one per size; empty: contiguous.
  /// \param holder Kept alive by the tensor and its copies; null: the caller keeps data alive.
  /// \return A defined tensor over data, which it does not copy.
  /// \throws InvalidArgument on a null data with elements, a negative size, sizes whose product
  ///         overflows int64, or a strides count that differs from sizes'.
  static Tensor fromBlob(void* data, ScalarType dtype, std::vector<int64_t> sizes,
                         Device device = Device::cpu(), std::vector<int64_t> strides = {},
                         std::shared_ptr<void> holder = nullptr);

  /// Allocates contiguous, uninitialised memory owned by the returned Tensor. CUDA memory needs
  /// a build with CUDA and a visible device; otherwise throws BackendError saying which is missing.
  /// Host memory of 1 MiB and more may come from blocks kept for reuse (C10D_HOST_CACHE_MB).
  /// \param sizes The size of each dimension, each >= 0.
  /// \param dtype The element type.
  /// \param device Where to allocate: the host, or a CUDA device.
  /// \return A defined, contiguous tensor that owns its memory.
  /// \throws InvalidArgument on a negative size or sizes whose product overflows int64.
  /// \throws BackendError when CUDA memory cannot be had (no CUDA support, or cudaMalloc fails).
  /// \throws Error when host memory is exhausted.
  static Tensor empty(std::vector<int64_t> sizes, ScalarType dtype, Device device = Device::cpu());

  /// CPU only: a contiguous tensor filled with zero bytes.
  /// \param sizes The size of each dimension, each >= 0.
  /// \param dtype The element type.
  /// \return A defined tensor on the CPU that owns its memory.
  /// \throws InvalidArgument or Error as empty() does.
  static Tensor zeros(std::vector<int64_t> sizes, ScalarType dtype);

  /// \return Whether this tensor was made by fromBlob(), empty(), zeros() or fromDLPack() (and
  ///         not reset() since); false for a default-constructed one.
  bool defined() const { return defined_; }
  /// Makes this an undefined tensor, releasing its memory and shape (as = Tensor() does).
  void reset() {
    shape_.reset();
    holder_.reset();
    data_ = nullptr;
    defined_ = false;
  }

  /// \return The first element's address (null for an undefined tensor). Not offset by anything:
  ///         the strides index from here.
  void* data() const { return data_; }
  /// The typed form of data().
  /// \tparam T The C++ type of dtype() (see ScalarTypeOf): float, Half, int64_t, ...
  /// \return The first element's address as T*.
  /// \throws InvalidArgument when T is not dtype()'s type.
  template <typename T>
  T* data() const {
    C10D_CHECK(dtype_ == ScalarTypeOf<T>::value, InvalidArgument, "Tensor::data<T>: tensor is ",
               dtype_, ", requested ", ScalarTypeOf<T>::value);
    return static_cast<T*>(data_);
  }

  /// \return The element type (Float32 for an undefined tensor).
  ScalarType dtype() const { return dtype_; }
  /// \return Where the memory lives (the CPU for an undefined tensor).
  const Device& device() const { return device_; }
  /// \return The size of each dimension (empty for a scalar or an undefined tensor).
  const std::vector<int64_t>& sizes() const { return shape().sizes; }
  /// \return Each dimension's stride, in elements.
  const std::vector<int64_t>& strides() const { return shape().strides; }
  /// \return The number of dimensions.
  int64_t dim() const { return static_cast<int64_t>(sizes().size()); }
  /// \return The number of elements: the product of sizes() (1 for a scalar or an undefined
  ///         tensor, 0 when a size is 0).
  int64_t numel() const { return shape().numel; }
  /// \return Bytes per element of dtype().
  size_t elementSize() const { return c10d::elementSize(dtype_); }
  /// \return numel() * elementSize(): the bytes of the elements (those a contiguous tensor spans).
  size_t nbytes() const { return static_cast<size_t>(numel()) * elementSize(); }

  /// True when the elements are laid out row-major without gaps (size-1 dims may have any stride).
  /// Known since the tensor was made: every op asks.
  /// \return Whether the tensor is contiguous (true for an undefined tensor).
  bool isContiguous() const { return shape().contiguous; }

  /// The memory owner shared by all views of this memory (null for unowned blobs).
  /// \return The holder given to fromBlob(), or the owner of empty()'s or fromDLPack()'s memory.
  const std::shared_ptr<void>& holder() const { return holder_; }

  /// "float32[2, 3] cpu", "int64[] cuda:0 (non-contiguous)": for error messages and logs.
  /// \return dtype, sizes, device and, when not contiguous, "(non-contiguous)";
  ///         "undefined tensor" for an undefined one.
  std::string describe() const;

 private:
  struct Shape {
    std::vector<int64_t> sizes;
    std::vector<int64_t> strides;
    int64_t numel = 1;  ///< the product of sizes (1 for none, as an undefined tensor has)
    bool contiguous = true;
  };
  static bool contiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);
  const Shape& shape() const { return shape_ ? *shape_ : kNoShape; }
  static const Shape kNoShape;

  void* data_ = nullptr;
  ScalarType dtype_ = ScalarType::Float32;
  Device device_;
  std::shared_ptr<const Shape> shape_;  ///< null: no dimensions
  std::shared_ptr<void> holder_;
  bool defined_ = false;
};

/// Contiguous row-major strides for sizes.
/// \param sizes The size of each dimension (a size of 0 counts as 1).
/// \return One stride per size, in elements; the last is 1.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& sizes);

/// Zero-copy export to DLPack (v0.6 layout). The returned DLManagedTensor keeps the memory alive
/// until its deleter is called; the consumer must call it exactly once. Bool is exported with
/// DLPack's kDLBool code (6), which is what current frameworks use.
/// \param tensor A defined tensor; the export aliases its memory.
/// \return A new DLManagedTensor (kDLCPU or kDLCUDA) owned by the caller until its deleter runs.
/// \throws InvalidArgument when tensor is undefined.
DLManagedTensor* toDLPack(const Tensor& tensor);

/// Zero-copy import: takes ownership of managed and calls its deleter when the last Tensor copy
/// referring to it is destroyed (also when this call throws). Accepts CPU, CUDA-host (as CPU)
/// and CUDA memory, lanes == 1, and the dtypes of ScalarType. Throws InvalidArgument naming the
/// unsupported device, dtype code/bits or lanes.
/// \param managed A DLPack tensor; must not be null. Owned by this call from its start.
/// \return A defined tensor over managed's memory (byte_offset applied), which it does not copy.
/// \throws InvalidArgument for a null managed, an unsupported device type, dtype or lanes, a
///         negative ndim, or a shape fromBlob() refuses (a negative size, sizes whose product
///         overflows int64, null data with elements).
Tensor fromDLPack(DLManagedTensor* managed);

}  // namespace c10d::inline v1
