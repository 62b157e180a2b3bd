#include "c10d/Cuda.hpp"

#include <cstring>

#include "c10d/Exception.hpp"

#ifdef C10D_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace c10d {

namespace {

thread_local void* tlsCurrentStream = nullptr;

#ifdef C10D_WITH_CUDA
void cudaCheck(cudaError_t status, const char* call, const std::string& what) {
  if (status == cudaSuccess) return;
  C10D_THROW(BackendError, what, ": ", call, " failed: ", cudaGetErrorName(status), " (",
             cudaGetErrorString(status), ")");
}

// Runs on device for the scope, then restores the thread's previous device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    cudaGetDevice(&previous_);
    if (device != previous_) cudaCheck(cudaSetDevice(device), "cudaSetDevice", "copyTensor");
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};
#endif

}  // namespace

void setCurrentCudaStream(void* stream) {
  tlsCurrentStream = stream;
}

void* currentCudaStream() {
  return tlsCurrentStream;
}

int cudaDeviceCount() {
#ifdef C10D_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

void copyTensor(const Tensor& dst, const Tensor& src) {
  C10D_CHECK(dst.dtype() == src.dtype() && dst.numel() == src.numel(), InvalidArgument,
             "copyTensor: cannot copy ", src.describe(), " into ", dst.describe());
  C10D_CHECK(dst.isContiguous() && src.isContiguous(), InvalidArgument,
             "copyTensor: both tensors must be contiguous, got ", src.describe(), " into ",
             dst.describe());
  if (dst.device().isCPU() && src.device().isCPU()) {
    if (dst.nbytes() > 0 && dst.data() != src.data()) {
      std::memcpy(dst.data(), src.data(), dst.nbytes());
    }
    return;
  }
#ifdef C10D_WITH_CUDA
  const Device& device = dst.device().isCPU() ? src.device() : dst.device();
  const std::string what = detail::concat("copyTensor ", src.describe(), " -> ", dst.describe());
  DeviceScope scope(device.index);
  auto stream = static_cast<cudaStream_t>(currentCudaStream());
  cudaCheck(cudaMemcpyAsync(dst.data(), src.data(), dst.nbytes(), cudaMemcpyDefault, stream),
            "cudaMemcpyAsync", what);
  cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize", what);
#else
  C10D_THROW(BackendError, "copyTensor ", src.describe(), " -> ", dst.describe(),
             ": this build of c10d has no CUDA support (configure with C10D_USE_CUDA=ON)");
#endif
}

void synchronizeCurrentStream(const Device& device) {
  if (device.isCPU()) return;
#ifdef C10D_WITH_CUDA
  DeviceScope scope(device.index);
  cudaCheck(cudaStreamSynchronize(static_cast<cudaStream_t>(currentCudaStream())),
            "cudaStreamSynchronize", "synchronizeCurrentStream on " + device.str());
#else
  C10D_THROW(BackendError, "synchronizeCurrentStream on ", device,
             ": this build of c10d has no CUDA support (configure with C10D_USE_CUDA=ON)");
#endif
}

}  // namespace c10d
