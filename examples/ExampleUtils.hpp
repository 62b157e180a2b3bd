// What every process-group example shares: joining the default group, the device its tensors
// live on, checking results against values the example computes itself, and turning the outcome
// into an exit status.
//
// Tensors are on the CPU, or on cuda:(LOCAL_RANK % devices) when C10D_EXAMPLE_DEVICE=cuda or
// when the backend serving CPU tensors cannot take them (C10D_BACKEND=nccl). The helpers below
// copy through host memory where the tensor is on a GPU, so the examples read the same on both.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "c10d/Backend.hpp"
#include "c10d/Init.hpp"
#include "c10d/core/Config.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Tensor.hpp"

namespace examples {

inline c10d::Device& exampleDevice() {
  static c10d::Device device = c10d::Device::cpu();
  return device;
}

inline c10d::Device chooseDevice(c10d::ProcessGroup& pg) {
  std::string requested = c10d::config::value("C10D_EXAMPLE_DEVICE");
  bool cuda = !requested.empty()
                  ? requested == "cuda"
                  : !pg.backend(c10d::DeviceType::CPU)->handlesDevice(c10d::DeviceType::CPU);
  if (!cuda) return c10d::Device::cpu();
  int devices = c10d::cudaDeviceCount();
  C10D_CHECK(devices > 0, c10d::InvalidArgument, "this example's tensors go to a GPU (backend ",
             pg.backend(c10d::DeviceType::CUDA)->name(), "), but no CUDA device is visible");
  return c10d::Device::cuda((pg.localRank() >= 0 ? pg.localRank() : pg.rank()) % devices);
}

// Uninitialised, on the example's device.
inline c10d::Tensor empty(std::vector<int64_t> sizes, c10d::ScalarType dtype) {
  return c10d::Tensor::empty(std::move(sizes), dtype, exampleDevice());
}

// tensor itself on the CPU, else a host copy of it.
inline c10d::Tensor toHost(const c10d::Tensor& tensor) {
  if (tensor.device().isCPU()) return tensor;
  c10d::Tensor host = c10d::Tensor::empty(tensor.sizes(), tensor.dtype());
  c10d::copyTensor(host, tensor);
  return host;
}

template <typename T>
T valueAt(const c10d::Tensor& tensor, int64_t i) {
  return toHost(tensor).data<T>()[i];
}

// Host memory for computing, and the example's device tensor the collectives move: the same
// tensor on the CPU. push() and pull() copy between them where they differ.
class Mirror {
 public:
  Mirror(std::vector<int64_t> sizes, c10d::ScalarType dtype)
      : device_(empty(sizes, dtype)),
        host_(device_.device().isCPU() ? device_ : c10d::Tensor::empty(sizes, dtype)) {}
  const c10d::Tensor& host() const { return host_; }
  const c10d::Tensor& device() const { return device_; }
  void push() const {
    if (host_.data() != device_.data()) c10d::copyTensor(device_, host_);
  }
  void pull() const {
    if (host_.data() != device_.data()) c10d::copyTensor(host_, device_);
  }

 private:
  c10d::Tensor device_;
  c10d::Tensor host_;
};

// Records failed checks instead of stopping at the first one: a rank that left early would make
// its peers wait in their next collective until the timeout, hiding the real failure behind a
// TimeoutError on another rank.
class Checker {
 public:
  Checker(const char* program, int rank) : program_(program), rank_(rank) {}

  template <typename... Args>
  bool expect(bool condition, const Args&... what) {
    if (!condition) fail(c10d::detail::concat(what...));
    return condition;
  }

  // Compares every element of tensor with expected(i); reports the first mismatch only, since
  // one wrong element usually means a whole wrong chunk.
  template <typename T, typename Expected>
  bool expectValues(const c10d::Tensor& tensor, const Expected& expected, const std::string& what) {
    const c10d::Tensor host = toHost(tensor);
    const T* data = host.data<T>();
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      if (data[i] != expected(i)) {
        fail(c10d::detail::concat(what, ": element ", i, " is ", +data[i], ", expected ",
                                  +expected(i)));
        return false;
      }
    }
    return true;
  }

  void fail(const std::string& what) {
    ++failures_;
    std::fprintf(stderr, "%s: rank %d: %s\n", program_, rank_, what.c_str());
  }

  int failures() const { return failures_; }

 private:
  const char* program_;
  int rank_;
  int failures_ = 0;
};

// Sets tensor[i] = value(i), on whichever device tensor is.
template <typename T, typename Value>
void fill(const c10d::Tensor& tensor, const Value& value) {
  c10d::Tensor host =
      tensor.device().isCPU() ? tensor : c10d::Tensor::empty(tensor.sizes(), tensor.dtype());
  T* data = host.data<T>();
  for (int64_t i = 0; i < tensor.numel(); ++i) data[i] = value(i);
  if (host.data() != tensor.data()) c10d::copyTensor(tensor, host);
}

// Zeros on the example's device.
template <typename T>
c10d::Tensor zeros(std::vector<int64_t> sizes, c10d::ScalarType dtype) {
  c10d::Tensor tensor = empty(std::move(sizes), dtype);
  fill<T>(tensor, [](int64_t) { return T(0); });
  return tensor;
}

// Joins the default process group (env://, backend from C10D_BACKEND, default gloo), runs body,
// then waits in a barrier so that rank 0, which hosts the store, does not leave while its peers
// still talk to it. Returns the exit status: 0 only when nothing threw and no check failed.
inline int runExample(const char* program,
                      const std::function<void(c10d::ProcessGroup&, Checker&)>& body) {
  // Launchers kill the other ranks once one fails; line buffering keeps what they printed so far.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int rank = -1;
  try {
    std::shared_ptr<c10d::ProcessGroup> pg = c10d::initProcessGroup();
    rank = pg->rank();
    exampleDevice() = chooseDevice(*pg);
    Checker checker(program, rank);
    body(*pg, checker);
    pg->barrier()->wait();
    if (checker.failures() > 0) {
      std::fprintf(stderr, "%s: rank %d: %d check(s) failed\n", program, rank, checker.failures());
      return 1;
    }
    return 0;
  } catch (const c10d::Error& e) {
    if (rank < 0) {
      std::fprintf(stderr, "%s: joining the process group failed: %s\n", program, e.what());
    } else {
      std::fprintf(stderr, "%s: rank %d: %s\n", program, rank, e.what());
    }
    return 1;
  }
}

}  // namespace examples
