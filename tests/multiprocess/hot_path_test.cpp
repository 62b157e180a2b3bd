// What a blocking small op costs the thread that calls it, checked without timing: heap
// allocations counted by replacing operator new in this program, mutex acquisitions and
// signal-mask changes by interposing pthread_mutex_lock and pthread_sigmask. A blocking op
// (issued, then waited for) allocates nothing and takes no lock once its group has run one op of
// its kind: its Work is reused, its op descriptor lives in it, the queue is claimed without a
// lock, and the flight recorder is written with plain stores.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/training/PowerSgd.hpp"
#include "store/HashStore.hpp"
#include "tests/support/MultiProcess.hpp"

namespace {
// Allocations made by this thread (the caller's: a blocking op runs on it).
thread_local long allocations = 0;
}  // namespace

void* operator new(std::size_t bytes) {
  ++allocations;
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
// pthread_sigmask and mutex calls by this thread: the library's calls resolve to these
// definitions first.
thread_local long maskChanges = 0;
thread_local long mutexLocks = 0;
extern "C" int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  using Real = int (*)(int, const sigset_t*, sigset_t*);
  static const Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "pthread_sigmask"));
  if (set != nullptr) ++maskChanges;
  return real(how, set, old);
}

extern "C" int pthread_mutex_lock(pthread_mutex_t* mutex) {
  using Real = int (*)(pthread_mutex_t*);
  static const Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "pthread_mutex_lock"));
  ++mutexLocks;
  return real(mutex);
}
extern "C" int pthread_mutex_trylock(pthread_mutex_t* mutex) {
  using Real = int (*)(pthread_mutex_t*);
  static const Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "pthread_mutex_trylock"));
  ++mutexLocks;
  return real(mutex);
}

void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace c10d::inline v1 {
namespace {

bool sigpipeBlocked() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGPIPE) == 1;
}

// What runs blocking op after op costs its thread: allocations and mutex acquisitions per op.
struct PerOp {
  double allocations;
  double locks;
};

// op() run a few times first (its group's first ops make what later ones reuse), then kOps
// times counted.
template <typename Op>
PerOp costPerOp(Op&& op) {
  for (int i = 0; i < 50; ++i) op();
  constexpr int kOps = 200;
  const long allocationsBefore = allocations, locksBefore = mutexLocks;
  for (int i = 0; i < kOps; ++i) op();
  return {static_cast<double>(allocations - allocationsBefore) / kOps,
          static_cast<double>(mutexLocks - locksBefore) / kOps};
}

// Checks (inside a rank) that op costs nothing per call.
template <typename Op>
void expectFree(const std::string& name, Op&& op) {
  const PerOp cost = costPerOp(op);
  test::checkEq(0.0, cost.allocations, name + ": heap allocations per blocking op");
  test::checkEq(0.0, cost.locks, name + ": mutex acquisitions per blocking op");
}

TEST(HotPathTest, CopyingATensorAllocatesNothing) {
  Tensor tensor = Tensor::zeros({2, 3, 4}, ScalarType::Float32);
  const long before = allocations;
  Tensor copy = tensor;
  Tensor another(copy);
  EXPECT_EQ(allocations - before, 0);
  EXPECT_EQ(another.sizes(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(another.strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(another.numel(), 24);
  EXPECT_EQ(another.data(), tensor.data());
  EXPECT_EQ(Tensor().numel(), 1);  // as before the shape was shared: the empty product
  EXPECT_TRUE(Tensor().sizes().empty());
}

TEST(HotPathTest, AGuardArmedWhenWritingBlocksSigpipeOnlyFromTheFirstWrite) {
  ASSERT_FALSE(sigpipeBlocked());
  {
    detail::SigpipeGuard quiet(detail::SigpipeGuard::kWhenWriting);
    EXPECT_FALSE(sigpipeBlocked()) << "no write yet: no system call";
    detail::SigpipeGuard::beforeSocketWrites();
    EXPECT_TRUE(sigpipeBlocked());
  }
  EXPECT_FALSE(sigpipeBlocked()) << "the mask is restored";
  {
    detail::SigpipeGuard quiet(detail::SigpipeGuard::kWhenWriting);
    {
      detail::SigpipeGuard inner;  // an inner guard that needs it now arms the outer one
      EXPECT_TRUE(sigpipeBlocked());
    }
    EXPECT_TRUE(sigpipeBlocked()) << "blocked until the outer guard ends";
  }
  EXPECT_FALSE(sigpipeBlocked());
  {
    detail::SigpipeGuard quiet;
    EXPECT_TRUE(sigpipeBlocked());
  }
  EXPECT_FALSE(sigpipeBlocked());
}

TEST(HotPathTest, TheCountersCount) {
  const long allocationsBefore = allocations, locksBefore = mutexLocks;
  auto held = std::make_unique<int>(1);
  std::mutex mutex;
  { std::lock_guard<std::mutex> guard(mutex); }
  EXPECT_EQ(allocations - allocationsBefore, 1);
  EXPECT_EQ(mutexLocks - locksBefore, 1);
}

TEST(HotPathTest, ABlockingAllreduceOnAGroupOfOneAllocatesNothingAndTakesNoLock) {
  ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, ProcessGroupOptions{.backend = "gloo"});
  Tensor one = Tensor::zeros({1}, ScalarType::Float32);
  const PerOp cost = costPerOp([&] { pg.allreduce(one)->wait(); });
  EXPECT_EQ(cost.allocations, 0);
  EXPECT_EQ(cost.locks, 0);
}

// PowerSGD keeps its scratch between steps: once a bucket's first step sized it, a step allocates
// what its two allreduces and its Future do, not a copy of the bucket.
TEST(HotPathTest, APowerSgdStepAllocatesNoScratch) {
  ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, ProcessGroupOptions{.backend = "gloo"});
  Tensor buffer = Tensor::zeros({256 * 256 + 100}, ScalarType::Float32);
  GradBucket bucket;
  bucket.buffer = buffer;
  bucket.average = ReduceOp::premulSum(1.0);
  bucket.parameters = {0, 1};
  bucket.gradients = {
      Tensor::fromBlob(buffer.data(), ScalarType::Float32, {256, 256}),
      Tensor::fromBlob(buffer.data<float>() + 256 * 256, ScalarType::Float32, {100})};
  CommHook hook = PowerSgd(PowerSgdOptions{.rank = 2}).hook();
  for (int i = 0; i < 20; ++i) hook(pg, bucket)->wait();
  const long before = allocations;
  constexpr int kSteps = 20;
  for (int i = 0; i < kSteps; ++i) hook(pg, bucket)->wait();
  const double perStep = static_cast<double>(allocations - before) / kSteps;
  // The tensors that wrap its two messages (a shape of two vectors each) and the step's Future
  // with its value; its two allreduces allocate nothing. The scratch cost about 15 more (a
  // push_back-grown message, the bucket's input, P and Q).
  EXPECT_LE(perStep, 2 * 3 + 2);
}

// Two ranks on shared memory: each collective and send/recv reaches the wire, and still allocates
// nothing, takes no lock, and makes no signal-mask system call (no socket is written).
TEST(HotPathTest, BlockingOpsOverSharedMemoryAllocateNothingTakeNoLockAndLeaveTheMaskAlone) {
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 2}, [](test::RankEnv& env) {
    ProcessGroup& pg = env.pg;
    const long masksBefore = maskChanges;
    Tensor one = Tensor::zeros({1}, ScalarType::Float32);
    Tensor pair = Tensor::zeros({2}, ScalarType::Float32);
    expectFree("allreduce", [&] { pg.allreduce(one)->wait(); });
    expectFree("broadcast", [&] { pg.broadcast(one, {.rootRank = 1})->wait(); });
    expectFree("allgather", [&] { pg.allgatherIntoTensor(pair, one)->wait(); });
    expectFree("reduce_scatter", [&] { pg.reduceScatterTensor(one, pair)->wait(); });
    expectFree("barrier", [&] { pg.barrier()->wait(); });
    // Rank 0 sends, rank 1 receives, then the other way: each op waits for its peer's.
    const int peer = 1 - env.rank;
    expectFree("send/recv", [&] {
      if (env.rank == 0) {
        pg.send(one, peer, 3)->wait();
        pg.recv(one, peer, 4)->wait();
      } else {
        pg.recv(one, peer, 3)->wait();
        pg.send(one, peer, 4)->wait();
      }
    });
    test::checkEq(0L, maskChanges - masksBefore, "pthread_sigmask calls");
  });
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(2, 0)) << test::report(outcomes);
}

// Over sockets (C10D_SHM=0) the guard does arm: SIGPIPE is blocked around the writes and the
// caller's mask is restored after each op.
TEST(HotPathTest, ASocketAllreduceBlocksSigpipeAroundItsWrites) {
  setenv("C10D_SHM", "0", 1);
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 2}, [](test::RankEnv& env) {
    Tensor one = Tensor::zeros({1}, ScalarType::Float32);
    const long masksBefore = maskChanges;
    for (int i = 0; i < 10; ++i) env.pg.allreduce(one)->wait();
    test::check(maskChanges - masksBefore >= 20, "each op blocked SIGPIPE and restored the mask");
    test::check(!sigpipeBlocked(), "SIGPIPE is not left blocked in the caller");
  });
  unsetenv("C10D_SHM");
  EXPECT_EQ(test::exitCodes(outcomes), std::vector<int>(2, 0)) << test::report(outcomes);
}

}  // namespace
}  // namespace c10d::inline v1
