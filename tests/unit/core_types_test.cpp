#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "c10d/Work.hpp"
#include "c10d/core/Device.hpp"
#include "c10d/core/HostBlockCache.hpp"
#include "c10d/core/ReduceOp.hpp"
#include "c10d/core/ScalarType.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {
namespace {

TEST(ScalarTypeTest, SizesAndNamesRoundTrip) {
  const std::pair<ScalarType, size_t> expected[] = {
      {ScalarType::Float32, 4},  {ScalarType::Float64, 8}, {ScalarType::Float16, 2},
      {ScalarType::BFloat16, 2}, {ScalarType::Int8, 1},    {ScalarType::Int16, 2},
      {ScalarType::Int32, 4},    {ScalarType::Int64, 8},   {ScalarType::UInt8, 1},
      {ScalarType::Bool, 1}};
  for (auto [type, size] : expected) {
    EXPECT_EQ(elementSize(type), size) << name(type);
    EXPECT_EQ(scalarTypeFromName(name(type)), type);
  }
  EXPECT_EQ(name(ScalarType::BFloat16), "bfloat16");
  EXPECT_EQ(scalarTypeFromName("half"), ScalarType::Float16);
  EXPECT_THROW(scalarTypeFromName("complex64"), InvalidArgument);
  EXPECT_TRUE(isFloatingPoint(ScalarType::BFloat16));
  EXPECT_FALSE(isFloatingPoint(ScalarType::Int8));
  EXPECT_TRUE(isIntegral(ScalarType::UInt8));
  EXPECT_FALSE(isIntegral(ScalarType::Bool));
}

TEST(DeviceTest, ParseAndPrint) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3").index, 3);
  EXPECT_EQ(Device::cuda(2).str(), "cuda:2");
  EXPECT_THROW(Device::parse("cuda:-1"), InvalidArgument);
  EXPECT_THROW(Device::parse("cuda:x"), InvalidArgument);
  EXPECT_THROW(Device::parse("tpu"), InvalidArgument);
}

TEST(ReduceOpTest, DtypeSupportAndErrors) {
  EXPECT_TRUE(supports(ReduceOp::SUM, ScalarType::BFloat16));
  EXPECT_TRUE(supports(ReduceOp::BAND, ScalarType::Int32));
  EXPECT_TRUE(supports(ReduceOp::BXOR, ScalarType::Bool));
  EXPECT_FALSE(supports(ReduceOp::BAND, ScalarType::Float32));
  EXPECT_FALSE(supports(ReduceOp::BOR, ScalarType::Float16));
  EXPECT_FALSE(supports(ReduceOp::AVG, ScalarType::Bool));
  EXPECT_FALSE(supports(ReduceOp::premulSum(2.0), ScalarType::Bool));
  try {
    checkReduceOp(ReduceOp::BAND, ScalarType::Float32, "allreduce");
    FAIL() << "BAND on float32 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce: reduce op band is not defined on float32"),
              std::string::npos)
        << e.what();
  }
  ReduceOp premul = ReduceOp::premulSum(0.25);
  EXPECT_EQ(premul.kind(), ReduceOp::PREMUL_SUM);
  EXPECT_DOUBLE_EQ(premul.factor(), 0.25);
  EXPECT_EQ(reduceOpFromName("MAX"), ReduceOp::MAX);
  EXPECT_THROW(reduceOpFromName("median"), InvalidArgument);
}

TEST(TensorTest, EmptyOwnsContiguousMemory) {
  Tensor t = Tensor::empty({2, 3, 4}, ScalarType::Float32);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_TRUE(t.isContiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  float* data = t.data<float>();
  for (int i = 0; i < 24; ++i) data[i] = static_cast<float>(i);
  Tensor alias = t;  // shallow copy shares memory
  EXPECT_EQ(alias.data<float>()[23], 23.0f);
  EXPECT_THROW(t.data<int32_t>(), InvalidArgument);
  EXPECT_EQ(t.describe(), "float32[2, 3, 4] cpu");
  EXPECT_FALSE(Tensor().defined());
}

TEST(TensorTest, ZerosAndZeroSized) {
  Tensor z = Tensor::zeros({5}, ScalarType::Int64);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(z.data<int64_t>()[i], 0);
  Tensor empty = Tensor::empty({0, 7}, ScalarType::Int8);
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.isContiguous());
  Tensor scalar = Tensor::empty({}, ScalarType::Float64);
  EXPECT_EQ(scalar.numel(), 1);
  // No element, but strides past int64 (found by the RPC frame fuzzer).
  constexpr int64_t kHuge = int64_t{1} << 40;
  EXPECT_THROW(Tensor::empty({0, kHuge, kHuge}, ScalarType::Int8), InvalidArgument);
  EXPECT_THROW(Tensor::empty({kHuge, kHuge}, ScalarType::Int8), InvalidArgument);
}

TEST(TensorTest, FromBlobStridesAndErrors) {
  int32_t buffer[6] = {0, 1, 2, 3, 4, 5};
  Tensor transposed = Tensor::fromBlob(buffer, ScalarType::Int32, {3, 2}, Device::cpu(), {1, 3});
  EXPECT_FALSE(transposed.isContiguous());
  EXPECT_NE(transposed.describe().find("non-contiguous"), std::string::npos);
  EXPECT_THROW(Tensor::fromBlob(nullptr, ScalarType::Int32, {2}), InvalidArgument);
  EXPECT_THROW(Tensor::fromBlob(buffer, ScalarType::Int32, {-1}), InvalidArgument);
  EXPECT_THROW(Tensor::fromBlob(buffer, ScalarType::Int32, {2, 3}, Device::cpu(), {1}),
               InvalidArgument);
}

TEST(TensorTest, CudaWithoutDeviceIsAClearError) {
  try {
    Tensor::empty({4}, ScalarType::Float32, Device::cuda(0));
    GTEST_SKIP() << "a CUDA device is present; allocation succeeded";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

TEST(DLPackTest, ExportImportRoundTripIsZeroCopy) {
  for (ScalarType type : kAllScalarTypes) {
    Tensor t = Tensor::empty({3, 5}, type);
    std::memset(t.data(), 1, t.nbytes());
    DLManagedTensor* managed = toDLPack(t);
    EXPECT_EQ(managed->dl_tensor.data, t.data());
    EXPECT_EQ(managed->dl_tensor.ndim, 2);
    EXPECT_EQ(managed->dl_tensor.shape[1], 5);
    EXPECT_EQ(managed->dl_tensor.dtype.bits, elementSize(type) * 8);
    Tensor back = fromDLPack(managed);
    EXPECT_EQ(back.data(), t.data()) << name(type);
    EXPECT_EQ(back.dtype(), type);
    EXPECT_EQ(back.sizes(), t.sizes());
    EXPECT_EQ(back.strides(), t.strides());
  }
}

TEST(DLPackTest, ExportKeepsMemoryAliveUntilDeleter) {
  DLManagedTensor* managed;
  {
    Tensor t = Tensor::empty({1024}, ScalarType::Float64);
    t.data<double>()[1023] = 42.0;
    managed = toDLPack(t);
  }  // the only Tensor is gone; the DLPack capsule still owns the memory
  EXPECT_EQ(static_cast<double*>(managed->dl_tensor.data)[1023], 42.0);
  managed->deleter(managed);
}

struct ForeignTensor {
  float values[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 2};
  int64_t strides[2] = {3, 1};  // a 2x2 window of a 2x3 matrix
  DLManagedTensor managed{};
  bool* deleted;
};

TEST(DLPackTest, ImportHonoursOffsetStridesAndCallsDeleterOnce) {
  bool deleted = false;
  auto* foreign = new ForeignTensor;
  foreign->deleted = &deleted;
  DLTensor& dl = foreign->managed.dl_tensor;
  dl.data = foreign->values;
  dl.byte_offset = sizeof(float);  // start at element 1
  dl.device = {kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = {kDLFloat, 32, 1};
  dl.shape = foreign->shape;
  dl.strides = foreign->strides;
  foreign->managed.manager_ctx = foreign;
  foreign->managed.deleter = [](DLManagedTensor* self) {
    auto* owner = static_cast<ForeignTensor*>(self->manager_ctx);
    *owner->deleted = true;
    delete owner;
  };
  {
    Tensor t = fromDLPack(&foreign->managed);
    Tensor copy = t;
    EXPECT_EQ(t.data<float>()[0], 2.0f);
    EXPECT_EQ(t.data<float>()[t.strides()[0]], 5.0f);
    EXPECT_FALSE(t.isContiguous());
    t = Tensor();
    EXPECT_FALSE(deleted);  // copy still refers to it
  }
  EXPECT_TRUE(deleted);
}

TEST(DLPackTest, ImportRejectsUnsupportedAndStillDeletes) {
  static bool deleted;
  deleted = false;
  static int64_t shape[1] = {4};
  auto* managed = new DLManagedTensor{};
  managed->dl_tensor.data = reinterpret_cast<void*>(0x1000);
  managed->dl_tensor.device = {kDLCPU, 0};
  managed->dl_tensor.ndim = 1;
  managed->dl_tensor.shape = shape;
  managed->dl_tensor.dtype = {kDLComplex, 64, 1};
  managed->deleter = [](DLManagedTensor* self) {
    deleted = true;
    delete self;
  };
  EXPECT_THROW(fromDLPack(managed), InvalidArgument);
  EXPECT_TRUE(deleted);
}

// ---- HostBlockCache ----

constexpr size_t kMiB = size_t{1} << 20;

TEST(HostBlockCacheTest, AFreedLargeBlockServesTheNextRequestOfItsSize) {
  detail::HostBlockCache cache(64 * kMiB);
  void* first;
  {
    auto block = cache.allocate(16 * kMiB);
    first = block.get();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % detail::HostBlockCache::kAlignment, 0u);
    EXPECT_EQ(cache.cachedBytes(), 0u);
  }
  EXPECT_EQ(cache.cachedBytes(), 16 * kMiB);
  // Up to 1/8 smaller takes the same block; the block keeps its size when it comes back.
  {
    auto block = cache.allocate(15 * kMiB);
    EXPECT_EQ(block.get(), first);
    EXPECT_EQ(cache.cachedBytes(), 0u);
  }
  EXPECT_EQ(cache.cachedBytes(), 16 * kMiB);
  // Much smaller, or larger, does not.
  auto small = cache.allocate(4 * kMiB);
  auto large = cache.allocate(17 * kMiB);
  EXPECT_NE(small.get(), first);
  EXPECT_NE(large.get(), first);
  EXPECT_EQ(cache.cachedBytes(), 16 * kMiB);
}

TEST(HostBlockCacheTest, SmallBlocksAndAZeroLimitKeepNothing) {
  detail::HostBlockCache cache(64 * kMiB);
  { auto block = cache.allocate(kMiB - 64 - 1); }
  { auto block = cache.allocate(0); }
  EXPECT_EQ(cache.cachedBytes(), 0u);
  detail::HostBlockCache off(0);
  { auto block = off.allocate(8 * kMiB); }
  EXPECT_EQ(off.cachedBytes(), 0u);
}

TEST(HostBlockCacheTest, KeepsAtMostItsLimitFreeingTheOldestFirst) {
  detail::HostBlockCache cache(10 * kMiB);
  void* oldest;
  void* newest;
  {
    auto a = cache.allocate(4 * kMiB);
    auto b = cache.allocate(4 * kMiB);
    auto c = cache.allocate(4 * kMiB);
    auto tooLarge = cache.allocate(11 * kMiB);
    oldest = a.get();
    newest = c.get();
    a.reset();  // kept first, so freed first
    b.reset();
    c.reset();  // 12 MiB would pass 10: a goes
    EXPECT_EQ(cache.cachedBytes(), 8 * kMiB);
  }  // tooLarge is over the limit by itself: freed, not kept
  EXPECT_EQ(cache.cachedBytes(), 8 * kMiB);
  auto first = cache.allocate(4 * kMiB);
  auto second = cache.allocate(4 * kMiB);
  auto third = cache.allocate(4 * kMiB);
  EXPECT_TRUE(first.get() == newest || second.get() == newest);
  EXPECT_NE(first.get(), oldest);
  EXPECT_NE(second.get(), oldest);
  EXPECT_EQ(cache.cachedBytes(), 0u);
}

TEST(HostBlockCacheTest, ThreadsAllocatingAndFreeingTogetherKeepTheCountsRight) {
  detail::HostBlockCache cache(32 * kMiB);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 200; ++i) {
        auto block = cache.allocate((1 + (i + t) % 3) * kMiB);
        static_cast<char*>(block.get())[0] = static_cast<char>(i);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_LE(cache.cachedBytes(), 32 * kMiB);
  EXPECT_GT(cache.cachedBytes(), 0u);
}

TEST(HostBlockCacheTest, LargeTensorsReuseTheProcessCache) {
  const size_t limit = detail::HostBlockCache::process().limitBytes();
  if (limit < 8 * kMiB) GTEST_SKIP() << "C10D_HOST_CACHE_MB is set below 8 in this environment";
  void* first;
  {
    Tensor t = Tensor::empty({int64_t{2} << 20}, ScalarType::Float32);  // 8 MiB
    first = t.data();
  }
  Tensor again = Tensor::empty({int64_t{2} << 20}, ScalarType::Float32);
  EXPECT_EQ(again.data(), first);
}

// A hook is the library's own bookkeeping: a waiter released by the completion finds it done
// (the flight recorder's record of an op that wait() returned from). Callbacks come after.
TEST(FutureTest, CompletionHooksRunBeforeAnyWaitReturnsAndBeforeCallbacks) {
  for (int round = 0; round < 200; ++round) {
    auto future = std::make_shared<Future>();
    std::atomic<int> hookRan{0};
    std::vector<std::string> order;
    future->addCompletionHook([&](Future&) {
      std::this_thread::yield();  // gives a waiter released too early its chance
      order.push_back("hook");
      hookRan = 1;
    });
    future->addCallback([&](Future&) { order.push_back("callback"); });
    int seenByWaiter = -1;
    std::thread waiter([&] {
      future->wait(std::chrono::seconds(30), "hooked future");
      seenByWaiter = hookRan.load();
    });
    future->markCompleted();
    waiter.join();
    ASSERT_EQ(seenByWaiter, 1) << "round " << round << ": wait() returned before the hook ran";
    EXPECT_EQ(order, (std::vector<std::string>{"hook", "callback"}));
  }
  auto done = std::make_shared<Future>();
  done->markCompleted();
  bool ranAtOnce = false;
  done->addCompletionHook([&](Future&) { ranAtOnce = true; });
  EXPECT_TRUE(ranAtOnce) << "a hook added to a complete future runs at once";
}

}  // namespace
}  // namespace c10d::inline v1
