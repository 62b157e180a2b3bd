// The NCCL backend. Without a CUDA device only the parts that need none run (registration,
// routing, the clear error for CPU tensors); the ops skip with a message saying so. With one
// (the device tool), world size 1 runs every op on every dtype NCCL moves, a timeout, and Gloo's
// host staging of CUDA tensors, on real GPU memory.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <thread>
#include <vector>

#include "backends/nccl/NcclBackend.hpp"
#include "backends/nccl/NcclCommunicator.hpp"
#include "backends/nccl/NcclTypes.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "store/HashStore.hpp"
#include "tests/support/BackendCalls.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;

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
  test::BackendCalls nccl(pg->backend(DeviceType::CUDA), std::chrono::seconds(30));
  try {
    nccl.allreduce(cpu, {})->wait();
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
  // A stream that a host function holds for 3 s: ops ordered after it wait that long.
  static cudaStream_t stalledStream() {
    cudaStream_t stream = nullptr;
    if (cudaStreamCreate(&stream) != cudaSuccess) return nullptr;
    auto sleep3s = [](void*) { std::this_thread::sleep_for(std::chrono::seconds(3)); };
    if (cudaLaunchHostFunc(stream, sleep3s, nullptr) != cudaSuccess) return nullptr;
    return stream;
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

// Every dtype through every op (reductions on the dtypes NCCL has), at world size 1 (where each
// result is the input or a copy of it, so the check is exact for any dtype).
TEST_F(NcclOnDevice, EveryOpOnEveryDtype) {
  setenv("C10D_NCCL_BLOCKING_WAIT", "1", 1);
  auto pg = group("nccl");
  const Device gpu = Device::cuda(0);
  for (ScalarType dtype :
       {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16,
        ScalarType::Int8, ScalarType::UInt8, ScalarType::Int16, ScalarType::Int32,
        ScalarType::Int64, ScalarType::Bool}) {
    SCOPED_TRACE(std::string(name(dtype)));
    const size_t bytes = 8 * elementSize(dtype);
    // Bytes that are a valid value in every dtype: 0 or 1 in each byte.
    std::vector<uint8_t> pattern(bytes);
    for (size_t i = 0; i < bytes; ++i) pattern[i] = (i % elementSize(dtype) == 0) ? (i / 3) % 2 : 0;
    Tensor t = Tensor::empty({8}, dtype, gpu);
    auto reset = [&] { copyTensor(t, Tensor::fromBlob(pattern.data(), dtype, {8})); };
    auto expectPattern = [&](const Tensor& out, const char* op) {
      std::vector<uint8_t> got(out.nbytes());
      copyTensor(Tensor::fromBlob(got.data(), dtype, {out.numel()}), out);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], pattern[i % bytes]) << op << " byte " << i;
      }
    };
    auto fresh = [&] { return Tensor::empty({8}, dtype, gpu); };
    bool reducible = dtype != ScalarType::Int16;  // NCCL has no 16-bit integers to add
    reset();
    if (reducible) {
      pg->allreduce(t)->wait();
      expectPattern(t, "allreduce");
      pg->allreduceCoalesced({t, t})->wait();
      expectPattern(t, "allreduce_coalesced");
      pg->reduce(t)->wait();
      expectPattern(t, "reduce");
      Tensor out = fresh();
      pg->reduceScatterTensor(out, t)->wait();
      expectPattern(out, "reduce_scatter_tensor");
      out = fresh();
      pg->reduceScatter(out, {t})->wait();
      expectPattern(out, "reduce_scatter");
    }
    pg->broadcast(t)->wait();
    expectPattern(t, "broadcast");
    Tensor out = fresh();
    pg->allgatherIntoTensor(out, t)->wait();
    expectPattern(out, "allgather_into_tensor");
    std::vector<Tensor> list{fresh()};
    pg->allgather(list, t)->wait();
    expectPattern(list[0], "allgather");
    list = {fresh()};
    pg->gather(list, t)->wait();
    expectPattern(list[0], "gather");
    out = fresh();
    pg->scatter(out, {t})->wait();
    expectPattern(out, "scatter");
    out = fresh();
    pg->alltoallBase(out, t, {8}, {8})->wait();
    expectPattern(out, "alltoall_base");
    list = {fresh()};
    pg->alltoall(list, {t})->wait();
    expectPattern(list[0], "alltoall");
  }
  pg->barrier()->wait();
}

// The op waits on the caller's stream, which a host function holds for 3 s: the watchdog must
// fail the Work at its 300 ms timeout, naming the op, and abort the communicator.
TEST_F(NcclOnDevice, AnOpPastItsTimeoutFailsAndBreaksTheGroup) {
  setenv("C10D_NCCL_BLOCKING_WAIT", "1", 1);
  auto pg = group("nccl");
  Tensor t = upload(std::vector<float>{1.0f, 2.0f}, ScalarType::Float32);
  pg->allreduce(t)->wait();  // the communicator exists before the stall
  cudaStream_t stalled = stalledStream();
  ASSERT_NE(stalled, nullptr);
  setCurrentCudaStream(stalled);
  std::shared_ptr<Work> work = pg->allreduce(t, {.timeout = std::chrono::milliseconds(300)});
  setCurrentCudaStream(nullptr);
  try {
    work->wait();
    FAIL() << "an allreduce behind a 3 s stall finished within its 300 ms timeout";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("timed out after 300 ms"), std::string::npos) << e.what();
  }
  // The group is broken now, and says why.
  EXPECT_THROW(pg->allreduce(t)->wait(), Error);
  pg->shutdown();
  cudaStreamSynchronize(stalled);
  cudaStreamDestroy(stalled);
}

// Retiring a group (what ElasticGroup does to the old generation after a loss) aborts its
// communicator without waiting: an op still queued fails with the reason instead of succeeding
// or waiting for its 60 s timeout, and later ops say the group was retired. Here the op waits
// behind a host function that holds the stream for 3 s; ncclCommAbort itself waited for it on
// the H100 with NCCL 2.28.9, so this checks the outcome, not the speed (a kernel spinning on a
// dead peer, which the abort flag is for, needs two GPUs). Before the fix the op was collected
// after the abort and succeeded.
TEST_F(NcclOnDevice, RetireFailsAQueuedOpWithTheReason) {
  setenv("C10D_NCCL_BLOCKING_WAIT", "1", 1);
  auto pg = group("nccl");
  Tensor t = upload(std::vector<float>{1.0f, 2.0f}, ScalarType::Float32);
  pg->allreduce(t)->wait();
  cudaStream_t stalled = stalledStream();
  ASSERT_NE(stalled, nullptr);
  setCurrentCudaStream(stalled);
  std::shared_ptr<Work> work = pg->allreduce(t, {.timeout = std::chrono::seconds(60)});
  setCurrentCudaStream(nullptr);
  auto retired = std::chrono::steady_clock::now();
  pg->retire("re-formed into generation 2 by the test");
  try {
    work->wait();
    ADD_FAILURE() << "the stuck allreduce succeeded after its group was retired";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("re-formed into generation 2 by the test"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  }
  std::cout << "retire to the stuck op's failure: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - retired)
                   .count()
            << " ms\n";
  try {
    pg->allreduce(t)->wait();
    ADD_FAILURE() << "a retired group ran an allreduce";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("re-formed into generation 2 by the test"),
              std::string::npos)
        << e.what();
  }
  cudaStreamSynchronize(stalled);
  cudaStreamDestroy(stalled);
}

// Gloo moves CUDA tensors too, through host memory.
TEST_F(NcclOnDevice, GlooStagesCudaTensorsThroughTheHost) {
  auto pg = group("gloo");
  Tensor t = upload(std::vector<float>{4, 5, 6}, ScalarType::Float32);
  pg->allreduce(t, {.reduceOp = ReduceOp::premulSum(3.0)})->wait();
  EXPECT_EQ(download<float>(t), (std::vector<float>{12, 15, 18}));
  Tensor out = Tensor::empty({3}, ScalarType::Float32, Device::cuda(0));
  pg->allgatherIntoTensor(out, t)->wait();
  EXPECT_EQ(download<float>(out), (std::vector<float>{12, 15, 18}));
}

// Refused before any device work, so this runs without a GPU: the tensors only claim to be on
// cuda:0, and a refusal that came later would fail on the missing device instead.
TEST(NcclBackend, WhatNcclLacksIsRefusedBeforeTouchingTheDevice) {
  auto pg = group("nccl");
  std::vector<int16_t> shortsMemory(4);
  Tensor shorts = Tensor::fromBlob(shortsMemory.data(), ScalarType::Int16, {4}, Device::cuda(0));
  std::vector<int32_t> intsMemory(4);
  Tensor ints = Tensor::fromBlob(intsMemory.data(), ScalarType::Int32, {4}, Device::cuda(0));
  auto expectRefusal = [](const std::function<void()>& op, const std::string& words) {
    try {
      op();
      FAIL() << "accepted; expected a refusal saying '" << words << "'";
    } catch (const BackendError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  // The backend itself: without a GPU, ProcessGroup refuses these tensors before any backend
  // sees them ("no usable GPU"), and the backend's own refusals are what this test is about.
  test::BackendCalls nccl(pg->backend(DeviceType::CUDA), 10s);
  expectRefusal([&] { nccl.allreduce(shorts, {.timeout = 10s})->wait(); },
                "backend nccl does not support allreduce on int16");
  expectRefusal([&] { nccl.reduceScatterTensor(shorts, shorts, {.timeout = 10s})->wait(); },
                "backend nccl does not support reduce_scatter_tensor on int16");
  expectRefusal([&] { nccl.allreduce(ints, {.reduceOp = ReduceOp::BOR, .timeout = 10s})->wait(); },
                "backend nccl does not support allreduce with bor");
  expectRefusal([&] { nccl.reduce(ints, {.reduceOp = ReduceOp::BXOR, .timeout = 10s})->wait(); },
                "backend nccl does not support reduce with bxor");
}

// NCCL's group calls need no device, so these run here. NCCL refuses an ncclGroupEnd without an
// open group (invalid usage): that tells whether a guard left its group open.
TEST(NcclGroupGuard, AThrowBetweenStartAndEndStillClosesTheGroup) {
  std::function<std::string()> what = [] { return std::string("test"); };
  try {
    nccl::GroupGuard group(nullptr, what);
    throw std::runtime_error("a call inside the group failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "the guard left its group open";
  {
    nccl::GroupGuard group(nullptr, what);
    group.end();
  }
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "end() then the destructor ended no group";
}

// Ranks as threads over one HashStore: how a communicator's creation waits for its ranks.
TEST(NcclCommunicatorCreation, AMissingRankIsNamedAtTheDeadline) {
  auto store = std::make_shared<HashStore>();
  std::atomic<bool> cancelled{false};
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  auto deadline = std::chrono::steady_clock::now() + 400ms;
  for (int rank = 0; rank < 2; ++rank) {  // rank 2 of 3 never comes
    ranks.emplace_back([&, rank] {
      try {
        nccl::awaitEveryRank(*store, "nccl/arrived/", rank, 3, deadline, cancelled,
                             [rank] { return "rank " + std::to_string(rank); });
        errors[rank] = "returned";
      } catch (const TimeoutError& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_GE(std::chrono::steady_clock::now(), deadline);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(errors[rank].find("rank " + std::to_string(rank) + ": rank(s) 2 did not come"),
              std::string::npos)
        << errors[rank];
  }
}

TEST(NcclCommunicatorCreation, EveryRankArrivingEndsTheWait) {
  auto store = std::make_shared<HashStore>();
  std::atomic<bool> cancelled{false};
  std::vector<std::thread> ranks;
  std::atomic<int> returned{0};
  for (int rank = 0; rank < 3; ++rank) {
    ranks.emplace_back([&, rank] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50 * rank));  // arrive in turn
      nccl::awaitEveryRank(*store, "nccl/arrived/", rank, 3, std::chrono::steady_clock::now() + 30s,
                           cancelled, [] { return std::string("test"); });
      ++returned;
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(returned.load(), 3);
}

TEST(NcclCommunicatorCreation, CancelEndsTheWaitAtOnce) {
  auto store = std::make_shared<HashStore>();
  std::atomic<bool> cancelled{false};
  auto start = std::chrono::steady_clock::now();
  std::thread shutdown([&] {
    std::this_thread::sleep_for(200ms);
    cancelled.store(true);
  });
  try {
    nccl::awaitEveryRank(*store, "nccl/arrived/", 0, 2, start + 60s, cancelled,
                         [] { return std::string("rank 0"); });
    ADD_FAILURE() << "the wait returned, but rank 1 never came";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("shut down while waiting"), std::string::npos) << e.what();
  }
  shutdown.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "the cancel did not end the wait";
}

}  // namespace
}  // namespace c10d::inline v1
