#pragma once

// Private to c10d's sources built with CUDA (c10d/core/Cuda.cpp, c10d/core/Tensor.cpp, the NCCL
// backend): status checks for CUDA runtime calls and a guard for the calling thread's current
// device.

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

// Throws BackendError "<what()>: <call> failed: <CUDA's name> (<CUDA's message>)".
inline void cudaCheck(cudaError_t status, const char* call,
                      const std::function<std::string()>& what) {
  if (status == cudaSuccess) return;
  C10D_THROW(BackendError, what(), ": ", call, " failed: ", cudaGetErrorName(status), " (",
             cudaGetErrorString(status), ")");
}

#define C10D_CUDA(call, what) ::c10d::cudaCheck((call), #call, what)

// Makes device the calling thread's current one for the scope, then restores the previous one.
// Never throws (it runs in destructors and watchdogs): callers that must not go on with the
// wrong device check status().
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device) {
    status_ = cudaGetDevice(&previous_);
    if (status_ == cudaSuccess && device != previous_) status_ = cudaSetDevice(device);
  }
  ~CudaDeviceGuard() { cudaSetDevice(previous_); }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

  cudaError_t status() const { return status_; }

 private:
  int previous_ = 0;
  cudaError_t status_ = cudaSuccess;
};

}  // namespace c10d::inline v1
