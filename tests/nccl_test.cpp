// The NCCL backend. Without a CUDA device only the parts that need none run (registration,
// routing, the clear error for CPU tensors); the ops skip with a message saying so. With one
// (the device tool), world size 1 runs every op on real GPU memory.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "c10d/Exception.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/backends/nccl/NcclBackend.hpp"
#include "c10d/store/HashStore.hpp"

namespace c10d {
namespace {

std::shared_ptr<ProcessGroup> group(const std::string& spec) {
  ProcessGroupOptions options;
  options.backend = spec;
  options.timeout = std::chrono::seconds(30);
  return std::make_shared<ProcessGroup>(std::make_shared<HashStore>(), 0, 1, options);
}

TEST(NcclBackend, RoutesCudaTensorsAndNeedsNoGpuUntilUsed) {
  ASSERT_TRUE(isBackendRegistered("nccl"));
  auto pg = group("cpu:gloo,cuda:nccl");
  EXPECT_EQ(pg->backend(DeviceType::CUDA)->name(), "nccl");
  EXPECT_EQ(pg->backend(DeviceType::CPU)->name(), "gloo");
  Tensor cpu = Tensor::zeros({4}, ScalarType::Float32);
  pg->allreduce(cpu)->wait();  // the CPU side works whatever the GPU situation
  auto nccl = pg->backend(DeviceType::CUDA);
  try {
    nccl->allreduce(cpu, {})->wait();
    FAIL() << "the nccl backend accepted a CPU tensor";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("takes CUDA tensors"), std::string::npos) << e.what();
  }
}

class NcclOnDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cudaDeviceCount() == 0) {
      GTEST_SKIP() << "no CUDA device here: NCCL ops need a GPU (run this test on the device "
                      "machine)";
    }
  }
  template <typename T>
  Tensor upload(const std::vector<T>& values, ScalarType dtype) {
    Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, dtype, Device::cuda(0));
    EXPECT_EQ(cudaMemcpy(t.data(), values.data(), t.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
    return t;
  }
  template <typename T>
  std::vector<T> download(const Tensor& t) {
    std::vector<T> values(t.numel());
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(values.data(), t.data(), t.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return values;
  }
};

TEST_F(NcclOnDevice, EveryCollectiveOnOneRank) {
  setenv("C10D_NCCL_BLOCKING_WAIT", "1", 1);  // waits check results on the host
  auto pg = group("nccl");
  std::vector<float> values{1.5f, -2.0f, 3.25f, 0.0f};
  Tensor t = upload(values, ScalarType::Float32);
  pg->allreduce(t)->wait();
  EXPECT_EQ(download<float>(t), values);
  pg->allreduce(t, {.reduceOp = ReduceOp::premulSum(2.0)})->wait();
  EXPECT_EQ(download<float>(t), (std::vector<float>{3.0f, -4.0f, 6.5f, 0.0f}));
  pg->broadcast(t)->wait();
  Tensor gathered = Tensor::empty({4}, ScalarType::Float32, Device::cuda(0));
  pg->allgatherIntoTensor(gathered, t)->wait();
  EXPECT_EQ(download<float>(gathered), download<float>(t));
  Tensor scattered = Tensor::empty({4}, ScalarType::Float32, Device::cuda(0));
  pg->reduceScatterTensor(scattered, t)->wait();
  EXPECT_EQ(download<float>(scattered), download<float>(t));
  Tensor exchanged = Tensor::empty({4}, ScalarType::Float32, Device::cuda(0));
  pg->alltoallBase(exchanged, t)->wait();
  EXPECT_EQ(download<float>(exchanged), download<float>(t));
  pg->barrier()->wait();
  std::vector<int64_t> longs{7, -9};
  Tensor l = upload(longs, ScalarType::Int64);
  pg->allreduce(l, {.reduceOp = ReduceOp::MAX})->wait();
  EXPECT_EQ(download<int64_t>(l), longs);
}

TEST_F(NcclOnDevice, WhatNcclLacksIsAClearError) {
  auto pg = group("nccl");
  Tensor shorts = Tensor::empty({4}, ScalarType::Int16, Device::cuda(0));
  EXPECT_THROW(pg->allreduce(shorts)->wait(), BackendError);
  Tensor ints = Tensor::empty({4}, ScalarType::Int32, Device::cuda(0));
  EXPECT_THROW(pg->allreduce(ints, {.reduceOp = ReduceOp::BOR})->wait(), BackendError);
}

}  // namespace
}  // namespace c10d
