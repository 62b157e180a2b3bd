// What a blocking small op costs the thread that calls it (issue 32), checked without timing:
// heap allocations counted by replacing operator new in this program, and signal-mask changes
// by interposing pthread_sigmask. The bounds are today's counts: a change that adds work to every op fails
// here, and one that removes some lowers the bound.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <new>

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
// pthread_sigmask calls by this thread: the library's calls resolve to this definition first.
thread_local long maskChanges = 0;
extern "C" int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  using Real = int (*)(int, const sigset_t*, sigset_t*);
  static const Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "pthread_sigmask"));
  if (set != nullptr) ++maskChanges;
  return real(how, set, old);
}

void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace c10d::inline v0 {
namespace {

bool sigpipeBlocked() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGPIPE) == 1;
}

// Allocations per blocking allreduce of one float, after enough ops that the flight recorder's
// ring (1000 entries by default) has wrapped and kept its buffers.
double allocationsPerOp(ProcessGroup& pg) {
  Tensor one = Tensor::zeros({1}, ScalarType::Float32);
  for (int i = 0; i < 1100; ++i) pg.allreduce(one)->wait();
  constexpr int kOps = 200;
  const long before = allocations;
  for (int i = 0; i < kOps; ++i) pg.allreduce(one)->wait();
  return static_cast<double>(allocations - before) / kOps;
}

// Per op today: the Work and its Future; the op's description and its arguments', and the run
// closure (std::function each); the Work's outputs; the flight recorder's completion hook; and
// a block of the op queue's deque every 32 ops.
constexpr double kAllocationsPerOp = 8 + 1.0 / 32;

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

TEST(HotPathTest, ABlockingOpOnAGroupOfOneAllocatesAFewTimes) {
  ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, ProcessGroupOptions{.backend = "gloo"});
  const double perOp = allocationsPerOp(pg);
  EXPECT_LE(perOp, kAllocationsPerOp);
  EXPECT_GT(perOp, 0) << "the counter counts";
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
  bucket.gradients = {Tensor::fromBlob(buffer.data(), ScalarType::Float32, {256, 256}),
                      Tensor::fromBlob(buffer.data<float>() + 256 * 256, ScalarType::Float32, {100})};
  CommHook hook = PowerSgd(PowerSgdOptions{.rank = 2}).hook();
  for (int i = 0; i < 1100; ++i) hook(pg, bucket)->wait();  // the recorder's ring wraps too
  const long before = allocations;
  constexpr int kSteps = 20;
  for (int i = 0; i < kSteps; ++i) hook(pg, bucket)->wait();
  const double perStep = static_cast<double>(allocations - before) / kSteps;
  // Two allreduces, the tensors that wrap their messages (a shape of two vectors each), the
  // step's Future with its value, and a spare one for blocks of the queue's deque. The scratch
  // cost about 15 more (a push_back-grown message, the bucket's input, P and Q).
  EXPECT_LE(perStep, 2 * kAllocationsPerOp + 2 * 3 + 2 + 1);
}

// Two ranks on shared memory: the op reaches the wire, and still allocates no more, and makes
// no signal-mask system call where no socket is written.
TEST(HotPathTest, ASharedMemoryAllreduceAllocatesNoMoreAndLeavesTheSignalMaskAlone) {
  auto outcomes = test::runRanks({.backend = "gloo", .worldSize = 2}, [](test::RankEnv& env) {
    const long masksBefore = maskChanges;
    const double perOp = allocationsPerOp(env.pg);
    test::checkEq(0L, maskChanges - masksBefore, "pthread_sigmask calls during 1300 allreduces");
    test::check(perOp <= kAllocationsPerOp,
                "allocations per op within the bound: " + std::to_string(perOp));
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
}  // namespace c10d::inline v0
