// Buffer descriptors: their checks, their CUDA stream, dtypes, and DLPack in and out.

#include <dlpack/dlpack.h>

#include "c10d/capi/Handles.hpp"
#include "c10d/core/Cuda.hpp"

namespace c10d::capi {
namespace {

// c10d_dtype's values are ScalarType's, in the same order: checked here so they cannot drift.
static_assert(C10D_FLOAT32 == static_cast<int>(ScalarType::Float32));
static_assert(C10D_FLOAT64 == static_cast<int>(ScalarType::Float64));
static_assert(C10D_FLOAT16 == static_cast<int>(ScalarType::Float16));
static_assert(C10D_BFLOAT16 == static_cast<int>(ScalarType::BFloat16));
static_assert(C10D_INT8 == static_cast<int>(ScalarType::Int8));
static_assert(C10D_INT16 == static_cast<int>(ScalarType::Int16));
static_assert(C10D_INT32 == static_cast<int>(ScalarType::Int32));
static_assert(C10D_INT64 == static_cast<int>(ScalarType::Int64));
static_assert(C10D_UINT8 == static_cast<int>(ScalarType::UInt8));
static_assert(C10D_BOOL == static_cast<int>(ScalarType::Bool));
static_assert(kAllScalarTypes.size() == C10D_BOOL + 1);

bool validDtype(int dtype) {
  return dtype >= 0 && dtype <= C10D_BOOL;
}

}  // namespace

Tensor tensorOf(const c10d_buffer* buffer, const char* call, const char* what) {
  C10D_CHECK(buffer != nullptr, InvalidArgument, call, ": ", what, " is NULL");
  C10D_CHECK(validDtype(buffer->dtype), InvalidArgument, call, ": ", what, ".dtype is ",
             static_cast<int>(buffer->dtype), ", not a c10d_dtype (0 to ", int(C10D_BOOL), ")");
  C10D_CHECK(buffer->count >= 0, InvalidArgument, call, ": ", what, ".count is ", buffer->count,
             "; it must be >= 0");
  C10D_CHECK(buffer->data != nullptr || buffer->count == 0, InvalidArgument, call, ": ", what,
             ".data is NULL with count ", buffer->count);
  Device device;
  switch (buffer->device_type) {
    case C10D_DEVICE_CPU:
      C10D_CHECK(buffer->stream == nullptr, InvalidArgument, call, ": ", what,
                 " is CPU memory with a stream; streams order CUDA work only (set it to NULL)");
      C10D_CHECK(buffer->device_index == 0, InvalidArgument, call, ": ", what, ".device_index is ",
                 buffer->device_index, " for CPU memory; it must be 0");
      break;
    case C10D_DEVICE_CUDA:
      device = Device::cuda(buffer->device_index);
      break;
    default:
      C10D_THROW(InvalidArgument, call, ": ", what, ".device_type is ",
                 static_cast<int>(buffer->device_type),
                 ", not C10D_DEVICE_CPU (0) or C10D_DEVICE_CUDA (1)");
  }
  return Tensor::fromBlob(buffer->data, static_cast<ScalarType>(buffer->dtype), {buffer->count},
                          device);
}

std::vector<Tensor> tensorsOf(const c10d_buffer* buffers, size_t count, const char* call,
                              const char* what) {
  C10D_CHECK(buffers != nullptr || count == 0, InvalidArgument, call, ": ", what,
             " is NULL with a count of ", count);
  std::vector<Tensor> tensors;
  tensors.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    std::string name = std::string(what) + "[" + std::to_string(i) + "]";
    tensors.push_back(tensorOf(&buffers[i], call, name.c_str()));
  }
  return tensors;
}

c10d_buffer bufferOf(const Tensor& tensor) {
  return c10d_buffer{tensor.data(),
                     tensor.numel(),
                     static_cast<c10d_dtype>(tensor.dtype()),
                     tensor.device().isCPU() ? C10D_DEVICE_CPU : C10D_DEVICE_CUDA,
                     tensor.device().isCPU() ? 0 : tensor.device().index,
                     nullptr};
}

std::chrono::milliseconds timeoutOf(int64_t timeoutMs) {
  return timeoutMs < 0 ? kDefaultTimeout : std::chrono::milliseconds(timeoutMs);
}

StreamScope::StreamScope(const char* call, const c10d_buffer* first, size_t firstCount,
                         const c10d_buffer* second, size_t secondCount) {
  const c10d_buffer* chosen = nullptr;
  auto consider = [&](const c10d_buffer* buffers, size_t count) {
    for (size_t i = 0; buffers != nullptr && i < count; ++i) {
      const c10d_buffer& buffer = buffers[i];
      if (buffer.device_type != C10D_DEVICE_CUDA) continue;
      if (chosen == nullptr) {
        chosen = &buffer;
        continue;
      }
      C10D_CHECK(buffer.stream == chosen->stream, InvalidArgument, call,
                 ": the CUDA buffers name different streams (", chosen->stream, " and ",
                 buffer.stream, "); one operation runs after one stream");
    }
  };
  consider(first, firstCount);
  consider(second, secondCount);
  if (chosen != nullptr) enter(chosen->stream);
}

StreamScope::StreamScope(const c10d_work& work) {
  if (work.onStream) enter(work.stream);
}

void StreamScope::enter(void* stream) {
  previous_ = currentCudaStream();
  setCurrentCudaStream(stream);
  stream_ = stream;
  set_ = true;
}

StreamScope::~StreamScope() {
  if (set_) setCurrentCudaStream(previous_);
}

void deliver(std::shared_ptr<Work> work, const std::shared_ptr<ProcessGroup>& group,
             const StreamScope& stream, c10d_work** out) {
  if (out == nullptr) {
    // A blocking call inside a coalescing block returns at once: its op runs at the block's end.
    if (!group->isCoalescing()) work->wait();
    return;
  }
  // A caller that asks for a handle will not wait now: a poll starts a queued op at once rather
  // than when the backend's worker next looks (Work::isCompleted).
  work->isCompleted();
  *out = new c10d_work{std::move(work), group, stream.active(), stream.stream()};
}

}  // namespace c10d::capi

using namespace c10d;
using namespace c10d::capi;

extern "C" {

const char* c10d_dtype_name(c10d_dtype dtype) {
  if (!validDtype(dtype)) return nullptr;
  return name(static_cast<ScalarType>(dtype)).data();  // names are literals: NUL-terminated
}

size_t c10d_dtype_size(c10d_dtype dtype) {
  return validDtype(dtype) ? elementSize(static_cast<ScalarType>(dtype)) : 0;
}

c10d_status c10d_buffer_from_dlpack(const DLManagedTensor* tensor, c10d_buffer* out) {
  return guarded([&] {
    C10D_CHECK(tensor != nullptr, InvalidArgument, "c10d_buffer_from_dlpack: tensor is NULL");
    C10D_CHECK(out != nullptr, InvalidArgument, "c10d_buffer_from_dlpack: out is NULL");
    // fromDLPack's checks and dtype mapping, over a copy whose deleter is unset: the caller keeps
    // ownership of the original.
    DLManagedTensor view = *tensor;
    view.deleter = nullptr;
    Tensor t = fromDLPack(&view);
    C10D_CHECK(t.isContiguous(), InvalidArgument,
               "c10d_buffer_from_dlpack: the tensor is not contiguous (", t.describe(),
               "); pass a contiguous copy");
    *out = bufferOf(t);
  });
}

c10d_status c10d_buffer_to_dlpack(const c10d_buffer* buffer, DLManagedTensor** out) {
  return guarded([&] {
    C10D_CHECK(out != nullptr, InvalidArgument, "c10d_buffer_to_dlpack: out is NULL");
    *out = toDLPack(tensorOf(buffer, "c10d_buffer_to_dlpack", "buffer"));
  });
}

}  // extern "C"
