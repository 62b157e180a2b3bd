#pragma once

/// \file
/// CUDA helpers present in every build: the calling thread's current stream, the device count,
/// copies between devices and stream synchronization.
///
/// CUDA helpers that exist in every build of c10d. Without CUDA support, or without a device,
/// they say so (a count of 0, or a BackendError naming what is missing) instead of failing to
/// link, so programs can be written once and skip their GPU parts.

#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

/// The stream the calling thread's device work runs on, as a cudaStream_t (nullptr: the legacy
/// default stream). Backends order their device work after it: the NCCL backend's stream waits
/// on it, and host staging copies on it. Thread-local, like PyTorch's current stream.
/// \param stream A cudaStream_t the caller keeps alive while it is current; nullptr: the legacy
///        default stream.
void setCurrentCudaStream(void* stream);
/// The calling thread's current stream, as setCurrentCudaStream() left it.
/// \return The cudaStream_t; nullptr (the legacy default stream) until the thread sets one.
void* currentCudaStream();

/// The number of CUDA devices this process sees (0 without CUDA support, a GPU or a driver).
/// \return That count, >= 0.
int cudaDeviceCount();

namespace detail {
/// For tests on machines without a GPU: cudaDeviceCount() answers count from now on (a negative
/// count: CUDA's answer again), so that a test double registered as a group's CUDA backend gets
/// tensors that say cuda:N (whose memory is on the host). Call it before the process's first op.
void setCudaDeviceCountForTesting(int count);
}  // namespace detail

/// Copies src's elements into dst between any two devices (cpu and cuda:N in either direction,
/// or within one). Both must be contiguous with the same dtype and element count. A copy that
/// touches CUDA memory runs on the calling thread's current stream, so it follows the work
/// already queued there, and the call returns once dst holds the data.
/// Throws InvalidArgument on mismatched tensors and BackendError when CUDA fails or this build
/// has no CUDA support.
/// \param dst The destination: as many elements of the same dtype as src, contiguous.
/// \param src The source, contiguous.
/// \throws InvalidArgument when dtypes or element counts differ or either is not contiguous.
/// \throws BackendError when a CUDA call fails or CUDA memory is involved in a build without CUDA.
void copyTensor(const Tensor& dst, const Tensor& src);

/// Blocks until the calling thread's current stream on device has finished its queued work
/// (for timing device work from the host). Throws BackendError like copyTensor.
/// \param device The device whose current stream to wait for; the CPU returns at once.
/// \throws BackendError when a CUDA call fails or device is CUDA in a build without CUDA.
void synchronizeCurrentStream(const Device& device);

}  // namespace c10d::inline v1
