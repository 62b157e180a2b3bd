#pragma once

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
  static Tensor fromBlob(void* data, ScalarType dtype, std::vector<int64_t> sizes,
                         Device device = Device::cpu(), std::vector<int64_t> strides = {},
                         std::shared_ptr<void> holder = nullptr);

  /// Allocates contiguous, uninitialised memory owned by the returned Tensor. CUDA memory needs
  /// a build with CUDA and a visible device; otherwise throws BackendError saying which is missing.
  static Tensor empty(std::vector<int64_t> sizes, ScalarType dtype, Device device = Device::cpu());

  /// CPU only: a contiguous tensor filled with zero bytes.
  static Tensor zeros(std::vector<int64_t> sizes, ScalarType dtype);

  bool defined() const { return defined_; }
  /// Makes this an undefined tensor, releasing its memory and shape (as = Tensor() does).
  void reset() {
    shape_.reset();
    holder_.reset();
    data_ = nullptr;
    defined_ = false;
  }

  void* data() const { return data_; }
  template <typename T>
  T* data() const {
    C10D_CHECK(dtype_ == ScalarTypeOf<T>::value, InvalidArgument, "Tensor::data<T>: tensor is ",
               dtype_, ", requested ", ScalarTypeOf<T>::value);
    return static_cast<T*>(data_);
  }

  ScalarType dtype() const { return dtype_; }
  const Device& device() const { return device_; }
  const std::vector<int64_t>& sizes() const { return shape().sizes; }
  const std::vector<int64_t>& strides() const { return shape().strides; }
  int64_t dim() const { return static_cast<int64_t>(sizes().size()); }
  int64_t numel() const { return shape().numel; }
  size_t elementSize() const { return c10d::elementSize(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * elementSize(); }

  /// True when the elements are laid out row-major without gaps (size-1 dims may have any stride).
  /// Known since the tensor was made: every op asks.
  bool isContiguous() const { return shape().contiguous; }

  /// The memory owner shared by all views of this memory (null for unowned blobs).
  const std::shared_ptr<void>& holder() const { return holder_; }

  /// "float32[2, 3] cpu", "int64[] cuda:0 (non-contiguous)": for error messages and logs.
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
std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& sizes);

/// Zero-copy export to DLPack (v0.6 layout). The returned DLManagedTensor keeps the memory alive
/// until its deleter is called; the consumer must call it exactly once. Bool is exported with
/// DLPack's kDLBool code (6), which is what current frameworks use.
DLManagedTensor* toDLPack(const Tensor& tensor);

/// Zero-copy import: takes ownership of managed and calls its deleter when the last Tensor copy
/// referring to it is destroyed (also when this call throws). Accepts CPU, CUDA-host (as CPU)
/// and CUDA memory, lanes == 1, and the dtypes of ScalarType. Throws InvalidArgument naming the
/// unsupported device, dtype code/bits or lanes.
Tensor fromDLPack(DLManagedTensor* managed);

}  // namespace c10d::inline v1
