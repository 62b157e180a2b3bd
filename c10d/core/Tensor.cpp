#include "c10d/core/Tensor.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "c10d/core/HostBlockCache.hpp"

#ifdef C10D_WITH_CUDA
#include "c10d/core/CudaRuntime.hpp"
#endif

namespace c10d::inline v1 {
namespace {

// DLPack >= 0.8 names this kDLBool; the 0.6 header we build against predates it.
constexpr uint8_t kDLBoolCode = 6;

int64_t checkedNumel(const std::vector<int64_t>& sizes) {
  // span counts a size of 0 as 1: it is the largest contiguous stride, which must fit as well
  // (sizes {0, 2^40, 2^40} hold no element but their strides would overflow).
  int64_t span = 1;
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    C10D_CHECK(sizes[d] >= 0, InvalidArgument, "tensor size ", sizes[d], " at dim ", d,
               " is negative");
    int64_t factor = std::max<int64_t>(sizes[d], 1);
    C10D_CHECK(span <= INT64_MAX / factor, InvalidArgument, "tensor sizes overflow int64 at dim ",
               d);
    span *= factor;
    empty = empty || sizes[d] == 0;
  }
  return empty ? 0 : span;
}

std::shared_ptr<void> allocate(size_t nbytes, const Device& device) {
  // 64-byte alignment suits every dtype and vector unit.
  if (device.isCPU()) return detail::HostBlockCache::process().allocate(nbytes);
#ifdef C10D_WITH_CUDA
  void* ptr = nullptr;
  {
    CudaDeviceGuard guard(device.index);
    cudaError_t status = guard.status();
    if (status == cudaSuccess) status = cudaMalloc(&ptr, nbytes == 0 ? 1 : nbytes);
    C10D_CHECK(status == cudaSuccess, BackendError, "cannot allocate ", nbytes, " bytes on ",
               device, ": ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
  }
  int index = device.index;
  return std::shared_ptr<void>(ptr, [index](void* p) {
    CudaDeviceGuard guard(index);
    cudaFree(p);
  });
#else
  C10D_THROW(BackendError, "cannot allocate on ", device,
             ": this build of c10d has no CUDA support (configure with C10D_USE_CUDA=ON)");
#endif
}

}  // namespace

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

Tensor Tensor::fromBlob(void* data, ScalarType dtype, std::vector<int64_t> sizes, Device device,
                        std::vector<int64_t> strides, std::shared_ptr<void> holder) {
  int64_t numel = checkedNumel(sizes);
  C10D_CHECK(data != nullptr || numel == 0, InvalidArgument,
             "Tensor::fromBlob: null data pointer for ", numel, " elements");
  if (strides.empty()) {
    strides = contiguousStrides(sizes);
  } else {
    C10D_CHECK(strides.size() == sizes.size(), InvalidArgument,
               "Tensor::fromBlob: ", strides.size(), " strides for ", sizes.size(), " dimensions");
  }
  Tensor tensor;
  tensor.data_ = data;
  tensor.dtype_ = dtype;
  tensor.device_ = device;
  const bool dense = contiguous(sizes, strides);
  tensor.shape_ =
      std::make_shared<const Shape>(Shape{std::move(sizes), std::move(strides), numel, dense});
  tensor.holder_ = std::move(holder);
  tensor.defined_ = true;
  return tensor;
}

Tensor Tensor::empty(std::vector<int64_t> sizes, ScalarType dtype, Device device) {
  size_t nbytes = static_cast<size_t>(checkedNumel(sizes)) * c10d::elementSize(dtype);
  std::shared_ptr<void> memory = allocate(nbytes, device);
  void* data = memory.get();
  return fromBlob(data, dtype, std::move(sizes), device, {}, std::move(memory));
}

Tensor Tensor::zeros(std::vector<int64_t> sizes, ScalarType dtype) {
  Tensor tensor = empty(std::move(sizes), dtype, Device::cpu());
  std::memset(tensor.data(), 0, tensor.nbytes());
  return tensor;
}

const Tensor::Shape Tensor::kNoShape{};

bool Tensor::contiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (sizes[d] == 0) return true;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

std::string Tensor::describe() const {
  if (!defined_) return "undefined tensor";
  std::ostringstream out;
  out << dtype_ << "[";
  const std::vector<int64_t>& sizes = shape().sizes;
  for (size_t d = 0; d < sizes.size(); ++d) out << (d ? ", " : "") << sizes[d];
  out << "] " << device_;
  if (!isContiguous()) out << " (non-contiguous)";
  return out.str();
}

// ---- DLPack ----

namespace {

DLDataType toDLDataType(ScalarType type) {
  DLDataType dt;
  dt.lanes = 1;
  dt.bits = static_cast<uint8_t>(c10d::elementSize(type) * 8);
  switch (type) {
#define C10D_DLPACK_CODE(name, type, bytes, text, kind, dlpack, ...) \
  case ScalarType::name:                                             \
    dt.code = dlpack;                                                \
    break;
    C10D_FORALL_SCALAR_TYPES(C10D_DLPACK_CODE)
#undef C10D_DLPACK_CODE
  }
  return dt;
}

ScalarType fromDLDataType(const DLDataType& dt) {
  C10D_CHECK(dt.lanes == 1, InvalidArgument, "fromDLPack: vector dtypes (lanes = ", dt.lanes,
             ") are not supported");
  switch (dt.code) {
    case kDLFloat:
      if (dt.bits == 16) return ScalarType::Float16;
      if (dt.bits == 32) return ScalarType::Float32;
      if (dt.bits == 64) return ScalarType::Float64;
      break;
    case kDLBfloat:
      if (dt.bits == 16) return ScalarType::BFloat16;
      break;
    case kDLInt:
      if (dt.bits == 8) return ScalarType::Int8;
      if (dt.bits == 16) return ScalarType::Int16;
      if (dt.bits == 32) return ScalarType::Int32;
      if (dt.bits == 64) return ScalarType::Int64;
      break;
    case kDLUInt:
      if (dt.bits == 8) return ScalarType::UInt8;
      break;
    case kDLBoolCode:
      if (dt.bits == 8) return ScalarType::Bool;
      break;
    default:
      break;
  }
  C10D_THROW(InvalidArgument, "fromDLPack: unsupported dtype (code ", int(dt.code), ", bits ",
             int(dt.bits), "); supported: float16/32/64, bfloat16, int8/16/32/64, uint8, bool");
}

// Owns what a DLManagedTensor points into: the exported Tensor (keeping its memory alive) and
// the shape/stride arrays DLTensor refers to.
struct ExportContext {
  Tensor tensor;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed;
};

}  // namespace

DLManagedTensor* toDLPack(const Tensor& tensor) {
  C10D_CHECK(tensor.defined(), InvalidArgument, "toDLPack: tensor is undefined");
  auto* context = new ExportContext{tensor, tensor.sizes(), tensor.strides(), {}};
  DLTensor& dl = context->managed.dl_tensor;
  dl.data = tensor.data();
  dl.device.device_type = tensor.device().isCPU() ? kDLCPU : kDLCUDA;
  dl.device.device_id = tensor.device().isCPU() ? 0 : tensor.device().index;
  dl.ndim = static_cast<int32_t>(tensor.dim());
  dl.dtype = toDLDataType(tensor.dtype());
  dl.shape = context->shape.data();
  dl.strides = context->strides.data();
  dl.byte_offset = 0;
  context->managed.manager_ctx = context;
  context->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<ExportContext*>(self->manager_ctx);
  };
  return &context->managed;
}

Tensor fromDLPack(DLManagedTensor* managed) {
  C10D_CHECK(managed != nullptr, InvalidArgument, "fromDLPack: null DLManagedTensor");
  // From here on the deleter runs exactly once, when the holder goes, whether or not we throw.
  std::shared_ptr<void> holder(managed, [](void* p) {
    auto* m = static_cast<DLManagedTensor*>(p);
    if (m->deleter != nullptr) m->deleter(m);
  });
  const DLTensor& dl = managed->dl_tensor;
  Device device;
  switch (dl.device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
      device = Device::cpu();
      break;
    case kDLCUDA:
      device = Device::cuda(dl.device.device_id);
      break;
    default:
      C10D_THROW(InvalidArgument, "fromDLPack: unsupported device type ",
                 int(dl.device.device_type), "; supported: CPU, CUDA host, CUDA");
  }
  C10D_CHECK(dl.ndim >= 0, InvalidArgument, "fromDLPack: negative ndim ", dl.ndim);
  ScalarType dtype = fromDLDataType(dl.dtype);
  std::vector<int64_t> sizes(dl.shape, dl.shape + dl.ndim);
  std::vector<int64_t> strides;
  if (dl.strides != nullptr) strides.assign(dl.strides, dl.strides + dl.ndim);
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  return Tensor::fromBlob(data, dtype, std::move(sizes), device, std::move(strides),
                          std::move(holder));
}

}  // namespace c10d::inline v1
