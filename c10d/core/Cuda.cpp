#include "c10d/core/Cuda.hpp"

#include <atomic>
#include <cstring>

#include "c10d/core/Exception.hpp"

#ifdef C10D_WITH_CUDA
#include "c10d/core/CudaRuntime.hpp"
#endif

namespace c10d::inline v1 {

namespace {

thread_local void* tlsCurrentStream = nullptr;
std::atomic<int> deviceCountForTesting{-1};

}  // namespace

void detail::setCudaDeviceCountForTesting(int count) {
  deviceCountForTesting.store(count < 0 ? -1 : count);
}

void setCurrentCudaStream(void* stream) {
  tlsCurrentStream = stream;
}

void* currentCudaStream() {
  return tlsCurrentStream;
}

int cudaDeviceCount() {
  if (const int testing = deviceCountForTesting.load(); testing >= 0) return testing;
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
  auto what = [&] { return detail::concat("copyTensor ", src.describe(), " -> ", dst.describe()); };
  CudaDeviceGuard guard(device.index);
  cudaCheck(guard.status(), "cudaSetDevice", what);
  auto stream = static_cast<cudaStream_t>(currentCudaStream());
  C10D_CUDA(cudaMemcpyAsync(dst.data(), src.data(), dst.nbytes(), cudaMemcpyDefault, stream), what);
  C10D_CUDA(cudaStreamSynchronize(stream), what);
#else
  C10D_THROW(BackendError, "copyTensor ", src.describe(), " -> ", dst.describe(),
             ": this build of c10d has no CUDA support (configure with C10D_USE_CUDA=ON)");
#endif
}

void synchronizeCurrentStream(const Device& device) {
  if (device.isCPU()) return;
#ifdef C10D_WITH_CUDA
  auto what = [&] { return "synchronizeCurrentStream on " + device.str(); };
  CudaDeviceGuard guard(device.index);
  cudaCheck(guard.status(), "cudaSetDevice", what);
  C10D_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(currentCudaStream())), what);
#else
  C10D_THROW(BackendError, "synchronizeCurrentStream on ", device,
             ": this build of c10d has no CUDA support (configure with C10D_USE_CUDA=ON)");
#endif
}

}  // namespace c10d::inline v1
