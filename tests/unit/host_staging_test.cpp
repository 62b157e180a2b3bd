// HostStagingBackend: CUDA tensors served by a CPU-only backend through host memory. There is no
// GPU here, so the "device" tensors are host memory labelled cuda:0 and the copier is a memcpy
// that checks it is asked to cross between a device and the host; the Gloo backend underneath is
// real (two ranks on threads of this process). ProcessGroup's routing to the staging layer is
// checked through the error it gives when the real CUDA copy has no device.

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <thread>

#include "c10d/Backend.hpp"
#include "c10d/HostStaging.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "store/HashStore.hpp"
#include "tests/support/BackendCalls.hpp"
#include "tests/support/ThreadRanks.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;
constexpr std::chrono::milliseconds kTimeout = 20s;

struct CopyLog {
  std::atomic<int> toHost{0};
  std::atomic<int> toDevice{0};
};

// Memory that claims to be on cuda:0; the copier below is the only thing that reads it as such.
Tensor fakeDevice(std::vector<int64_t> sizes, ScalarType dtype) {
  Tensor host = Tensor::empty(sizes, dtype);
  return Tensor::fromBlob(host.data(), dtype, sizes, Device::cuda(0), {}, host.holder());
}

HostStagingBackend::Copy memcpyCopier(CopyLog& log) {
  return [&log](const Tensor& dst, const Tensor& src) {
    ASSERT_NE(dst.device().isCPU(), src.device().isCPU())
        << "staging copied " << src.describe() << " to " << dst.describe();
    ASSERT_EQ(dst.nbytes(), src.nbytes());
    (dst.device().isCPU() ? log.toHost : log.toDevice)++;
    std::memcpy(dst.data(), src.data(), dst.nbytes());
  };
}

int32_t* ints(const Tensor& t) {
  return static_cast<int32_t*>(t.data());
}

void fill(const Tensor& t, int32_t base) {
  for (int64_t i = 0; i < t.numel(); ++i) ints(t)[i] = base + static_cast<int32_t>(i);
}

// Runs body(rank, staging backend) on two ranks, each a thread with its own Gloo backend.
void onTwoRanks(const std::function<void(int, test::BackendCalls&, CopyLog&)>& body) {
  test::onGlooThreadRanks(2, kTimeout, "staging", [&](int rank, std::shared_ptr<Backend> gloo) {
    CopyLog log;
    test::BackendCalls staging(std::make_shared<HostStagingBackend>(gloo, memcpyCopier(log)),
                               kTimeout);
    body(rank, staging, log);
  });
}

TEST(HostStagingTest, CollectivesReturnTheirResultsOnTheDevice) {
  onTwoRanks([](int rank, test::BackendCalls& staging, CopyLog& log) {
    Tensor t = fakeDevice({4}, ScalarType::Int32);
    fill(t, 10 * rank);
    staging.allreduce(t, {.reduceOp = ReduceOp::SUM, .timeout = kTimeout})->wait();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(ints(t)[i], 10 + 2 * i);
    EXPECT_EQ(log.toHost.load(), 1);
    EXPECT_EQ(log.toDevice.load(), 1);

    fill(t, rank == 1 ? 100 : -1);
    staging.broadcast(t, {.rootRank = 1, .timeout = kTimeout})->wait();
    EXPECT_EQ(ints(t)[3], 103);

    Tensor gathered = fakeDevice({8}, ScalarType::Int32);
    fill(t, 10 * rank);
    staging.allgatherIntoTensor(gathered, t, {.timeout = kTimeout})->wait();
    EXPECT_EQ(ints(gathered)[1], 1);
    EXPECT_EQ(ints(gathered)[5], 11);

    std::vector<Tensor> list{fakeDevice({4}, ScalarType::Int32),
                             fakeDevice({4}, ScalarType::Int32)};
    staging.allgather(list, t, {.timeout = kTimeout})->wait();
    EXPECT_EQ(ints(list[1])[2], 12);

    Tensor block = fakeDevice({4}, ScalarType::Int32);
    fill(gathered, rank);
    staging.reduceScatterTensor(block, gathered, {.reduceOp = ReduceOp::SUM, .timeout = kTimeout})
        ->wait();
    EXPECT_EQ(ints(block)[0], 1 + 2 * 4 * rank);

    // Uneven splits: rank 0 sends 1 element to itself and 3 to rank 1; rank 1 sends 2 and 2.
    Tensor input = fakeDevice({4}, ScalarType::Int32);
    fill(input, 10 * rank);
    std::vector<int64_t> inSplits =
        rank == 0 ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{2, 2};
    std::vector<int64_t> outSplits =
        rank == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{3, 2};
    Tensor output = fakeDevice({rank == 0 ? 3 : 5}, ScalarType::Int32);
    staging.alltoallBase(output, input, outSplits, inSplits, {.timeout = kTimeout})->wait();
    if (rank == 0) {
      EXPECT_EQ(ints(output)[0], 0);
      EXPECT_EQ(ints(output)[1], 10);
      EXPECT_EQ(ints(output)[2], 11);
    } else {
      EXPECT_EQ(ints(output)[0], 1);
      EXPECT_EQ(ints(output)[2], 3);
      EXPECT_EQ(ints(output)[4], 13);
    }

    std::vector<Tensor> pieces;
    if (rank == 0)
      pieces = {fakeDevice({4}, ScalarType::Int32), fakeDevice({4}, ScalarType::Int32)};
    fill(t, 10 * rank);
    staging.gather(pieces, t, {.rootRank = 0, .timeout = kTimeout})->wait();
    if (rank == 0) {
      EXPECT_EQ(ints(pieces[1])[3], 13);
    }

    std::vector<Tensor> parts;
    if (rank == 1) {
      parts = {fakeDevice({4}, ScalarType::Int32), fakeDevice({4}, ScalarType::Int32)};
      fill(parts[0], 50);
      fill(parts[1], 70);
    }
    staging.scatter(t, parts, {.rootRank = 1, .timeout = kTimeout})->wait();
    EXPECT_EQ(ints(t)[0], rank == 0 ? 50 : 70);
  });
}

TEST(HostStagingTest, PointToPointReportsTheSourceAndStagesBatches) {
  onTwoRanks([](int rank, test::BackendCalls& staging, CopyLog&) {
    Tensor t = fakeDevice({3}, ScalarType::Int32);
    if (rank == 0) {
      fill(t, 7);
      staging.send(t, 1, 5, kTimeout)->wait();
    } else {
      std::shared_ptr<Work> work = staging.recvAnysource(t, 5, kTimeout);
      work->wait();
      EXPECT_EQ(work->sourceRank(), 0);
      EXPECT_EQ(ints(t)[2], 9);
    }
    Tensor mine = fakeDevice({2}, ScalarType::Int32);
    Tensor theirs = fakeDevice({2}, ScalarType::Int32);
    fill(mine, 100 * (rank + 1));
    int peer = 1 - rank;
    std::vector<std::shared_ptr<Work>> works = staging.batchIsendIrecv(
        {{P2POp::Recv, theirs, peer, 1}, {P2POp::Send, mine, peer, 1}}, kTimeout);
    ASSERT_EQ(works.size(), 2u);
    for (auto& w : works) w->wait();
    EXPECT_EQ(ints(theirs)[1], 100 * (peer + 1) + 1);
  });
}

TEST(HostStagingTest, AnOpWhoseWorkWasDroppedStillCopiesBack) {
  onTwoRanks([](int rank, test::BackendCalls& staging, CopyLog& log) {
    Tensor t = fakeDevice({3}, ScalarType::Int32);
    fill(t, rank);
    staging.allreduce(t, {.reduceOp = ReduceOp::SUM, .timeout = kTimeout});  // Work dropped
    // Ops run in issue order: once the barrier is done, the allreduce and its copy back are.
    staging.barrier({.timeout = kTimeout})->wait();
    EXPECT_EQ(log.toDevice.load(), 1);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(ints(t)[i], 1 + 2 * i);
  });
}

TEST(HostStagingTest, AFailedOpLeavesTheDeviceOutputUntouched) {
  std::atomic<bool> done{false};
  onTwoRanks([&done](int rank, test::BackendCalls& staging, CopyLog& log) {
    if (rank != 0) {
      // Stays connected (and silent) until rank 0 has seen its receive time out.
      while (!done.load()) std::this_thread::sleep_for(5ms);
      return;
    }
    Tensor t = fakeDevice({2}, ScalarType::Int32);
    fill(t, 42);
    // Nobody sends: the receive times out, and nothing is copied back over t.
    std::shared_ptr<Work> work = staging.recv(t, 1, 99, 200ms);
    EXPECT_THROW(work->wait(), TimeoutError);
    EXPECT_FALSE(work->isSuccess());
    EXPECT_EQ(ints(t)[0], 42);
    EXPECT_EQ(log.toDevice.load(), 0);
    done = true;
  });
}

TEST(HostStagingTest, ACopyBackThatFailsFailsTheWork) {
  auto store = std::make_shared<HashStore>();
  BackendContext context{store, 0, 1, kTimeout, "staging", nullptr};
  std::shared_ptr<Backend> gloo = createBackend("gloo", context);
  test::BackendCalls staging(
      std::make_shared<HostStagingBackend>(gloo,
                                           [](const Tensor& dst, const Tensor& src) {
                                             if (!dst.device().isCPU()) {
                                               C10D_THROW(BackendError, "copy to ", dst.describe(),
                                                          " failed");
                                             }
                                             std::memcpy(dst.data(), src.data(), dst.nbytes());
                                           }),
      kTimeout);
  Tensor t = fakeDevice({2}, ScalarType::Int32);
  fill(t, 1);
  std::shared_ptr<Work> work =
      staging.allreduce(t, {.reduceOp = ReduceOp::SUM, .timeout = kTimeout});
  try {
    work->wait();
    FAIL() << "the failed copy back was not reported";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("copy to int32[2] cuda:0 failed"), std::string::npos)
        << e.what();
  }
  gloo->shutdown();
}

TEST(HostStagingTest, ProcessGroupRefusesCudaTensorsWithoutAGpu) {
  // Without a device, a tensor that says cuda:0 is refused up front, naming the op, instead of
  // reaching the staging copy and failing there with CUDA's cudaErrorInsufficientDriver. With a
  // device, ProcessGroup's routing to staging runs for real in nccl_test and the cuda examples.
  if (cudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present; nccl_test covers it";
  ProcessGroup pg(std::make_shared<HashStore>(), 0, 1,
                  ProcessGroupOptions{.backend = "gloo", .timeout = 10s});
  Tensor t = fakeDevice({2}, ScalarType::Int32);
  const std::pair<std::string, std::function<void()>> ops[] = {
      {"allreduce", [&] { pg.allreduce(t); }},
      {"broadcast", [&] { pg.broadcast(t); }},
  };
  for (const auto& [name, op] : ops) {
    try {
      op();
      ADD_FAILURE() << name << " on cuda:0 without a device was accepted";
    } catch (const InvalidArgument& e) {
      std::string message = e.what();
      EXPECT_EQ(message.rfind(name + ": ", 0), 0u) << message;
      EXPECT_NE(message.find("no usable GPU"), std::string::npos) << message;
    }
  }
  pg.allreduce(Tensor::zeros({2}, ScalarType::Int32))->wait();  // the group is unharmed
}

}  // namespace
}  // namespace c10d::inline v1
