// The ProcessGroup layer in one process: backend specs, the backend registry with a backend a
// program defines itself, world detection from launchers' variables, init methods, Work and
// Future. Multi-process behaviour of real backends is in pg_conformance_test.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <thread>
#include <type_traits>

#include "c10d/Init.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Exception.hpp"
#include "store/HashStore.hpp"
#include "tests/support/MultiProcess.hpp"
#include "tests/support/ThreadRanks.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> values) {
    for (const char* name : kManaged) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      unsetenv(name);
    }
    for (auto [name, value] : values) setenv(name, value, 1);
  }
  ~ScopedEnv() {
    for (auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  static constexpr const char* kManaged[] = {"RANK",
                                             "WORLD_SIZE",
                                             "LOCAL_RANK",
                                             "MASTER_ADDR",
                                             "MASTER_PORT",
                                             "OMPI_COMM_WORLD_RANK",
                                             "OMPI_COMM_WORLD_SIZE",
                                             "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "PMI_RANK",
                                             "PMI_SIZE",
                                             "SLURM_PROCID",
                                             "SLURM_NTASKS",
                                             "SLURM_LOCALID",
                                             "C10D_BACKEND",
                                             "C10D_TIMEOUT"};
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(BackendSpecTest, ParsesSingleAndPerDevice) {
  auto all = parseBackendSpec("gloo");
  EXPECT_EQ(all.at(DeviceType::CPU), "gloo");
  EXPECT_EQ(all.at(DeviceType::CUDA), "gloo");
  auto split = parseBackendSpec(" cpu:gloo , cuda:nccl ");
  EXPECT_EQ(split.at(DeviceType::CPU), "gloo");
  EXPECT_EQ(split.at(DeviceType::CUDA), "nccl");
  EXPECT_THROW(parseBackendSpec("tpu:gloo"), InvalidArgument);
  EXPECT_THROW(parseBackendSpec("cpu:gloo,cpu:mpi"), InvalidArgument);
  EXPECT_THROW(parseBackendSpec(""), InvalidArgument);
  EXPECT_THROW(parseBackendSpec("cpu:"), InvalidArgument);
}

// A backend a program brings itself: allreduce doubles the tensor (world of one), nothing else.
class DoublingBackend : public Backend {
 public:
  explicit DoublingBackend(const BackendContext& context)
      : Backend("doubling", context.rank, context.size) {}
  std::shared_ptr<Work> allreduce(const Tensor& tensor, const AllreduceOptions& options) override {
    auto work = std::make_shared<BackendWork>("doubling allreduce", options.timeout,
                                              std::vector<Tensor>{tensor});
    for (int64_t i = 0; i < tensor.numel(); ++i) tensor.data<float>()[i] *= 2;
    ++calls;
    work->finish();
    return work;
  }
  static inline std::atomic<int> calls{0};
};

TEST(BackendRegistryTest, ProgramRegisteredBackendIsSelectableByName) {
  if (!isBackendRegistered("doubling")) {
    registerBackend("doubling", [](const BackendContext& context) {
      return std::make_shared<DoublingBackend>(context);
    });
  }
  EXPECT_THROW(
      registerBackend("doubling",
                      [](const BackendContext& c) { return std::make_shared<DoublingBackend>(c); }),
      InvalidArgument);
  auto names = registeredBackends();
  EXPECT_NE(std::find(names.begin(), names.end(), "doubling"), names.end());

  ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, ProcessGroupOptions{.backend = "doubling"});
  Tensor t = Tensor::empty({3}, ScalarType::Float32);
  for (int i = 0; i < 3; ++i) t.data<float>()[i] = static_cast<float>(i + 1);
  int before = DoublingBackend::calls;
  pg.allreduce(t)->wait();
  EXPECT_EQ(DoublingBackend::calls, before + 1);
  EXPECT_EQ(t.data<float>()[2], 6.0f);
  try {
    pg.broadcast(t);
    FAIL() << "an op the backend lacks was accepted";
  } catch (const BackendError& e) {
    EXPECT_STREQ(e.what(), "backend doubling does not support broadcast");
  }
}

// A program's factory that returns null instead of throwing: the group refuses it by name.
TEST(BackendRegistryTest, FactoryReturningNoBackendIsABackendError) {
  if (!isBackendRegistered("returns_null")) {
    registerBackend("returns_null", [](const BackendContext&) { return nullptr; });
  }
  try {
    ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, {.backend = "returns_null"});
    FAIL() << "a group was made over a factory's null backend";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "the factory of backend 'returns_null' returned no backend (rank 0 of 1)"),
              std::string::npos)
        << e.what();
  }
}

// C10D_DEBUG=DETAIL over a program's backend that has allreduce and nothing else (no allgather
// for the check): the check runs through the store, so matching calls pass and a size that
// differs between two ranks is an InvalidArgument on both, before the backend sees either.
TEST(BackendRegistryTest, DetailCheckWorksOverABackendWithoutAllgather) {
  if (!isBackendRegistered("doubling")) {
    registerBackend("doubling", [](const BackendContext& context) {
      return std::make_shared<DoublingBackend>(context);
    });
  }
  ScopedEnv detail({{"C10D_DEBUG", "DETAIL"}});
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  const int before = DoublingBackend::calls;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        ProcessGroup pg(store, rank, 2, ProcessGroupOptions{.backend = "doubling", .timeout = 20s});
        Tensor same = Tensor::zeros({4}, ScalarType::Float32);
        pg.allreduce(same)->wait();
        Tensor differs = Tensor::zeros({4 + rank}, ScalarType::Float32);
        pg.allreduce(differs)->wait();
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(DoublingBackend::calls, before + 2) << "only the matching allreduce reaches it";
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("the ranks' collectives differ"), std::string::npos) << error;
    EXPECT_NE(error.find("float32[5]"), std::string::npos) << error;
  }
}

TEST(BackendRegistryTest, UnknownBackendNamesTheRegisteredOnes) {
  try {
    ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, ProcessGroupOptions{.backend = "nope"});
    FAIL() << "unknown backend accepted";
  } catch (const InvalidArgument& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("unknown backend 'nope'"), std::string::npos) << message;
    EXPECT_NE(message.find("gloo"), std::string::npos) << message;
  }
}

TEST(ProcessGroupTest, ConstructorRejectsBadRankAndSize) {
  auto store = std::make_shared<HashStore>();
  EXPECT_THROW(ProcessGroup(store, 2, 2), InvalidArgument);
  EXPECT_THROW(ProcessGroup(store, -1, 2), InvalidArgument);
  EXPECT_THROW(ProcessGroup(store, 0, 0), InvalidArgument);
  EXPECT_THROW(ProcessGroup(nullptr, 0, 1), InvalidArgument);
}

TEST(ProcessGroupTest, WorldOfOneRunsEveryCollectiveLocally) {
  ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, ProcessGroupOptions{.timeout = 10s});
  Tensor t = Tensor::empty({4}, ScalarType::Int32);
  for (int i = 0; i < 4; ++i) t.data<int32_t>()[i] = i;
  pg.allreduce(t, {.reduceOp = ReduceOp::AVG})->wait();
  EXPECT_EQ(t.data<int32_t>()[3], 3);
  Tensor out = Tensor::zeros({4}, ScalarType::Int32);
  pg.allgatherIntoTensor(out, t)->wait();
  EXPECT_EQ(out.data<int32_t>()[2], 2);
  pg.barrier()->wait();
  std::shared_ptr<Work> passed = pg.monitoredBarrier();
  ASSERT_NE(passed, nullptr);
  EXPECT_TRUE(passed->isCompleted());
  EXPECT_TRUE(passed->isSuccess());
  EXPECT_NE(passed->description().find("monitored_barrier"), std::string::npos)
      << passed->description();
  passed->wait();
  EXPECT_EQ(pg.globalRank(0), 0);
  EXPECT_EQ(pg.groupRank(0), 0);
  EXPECT_EQ(pg.groupRank(5), std::nullopt);
  pg.shutdown();
  try {
    pg.allreduce(t);
    ADD_FAILURE() << "allreduce after shutdown() was accepted";
  } catch (const StateError& e) {
    EXPECT_EQ(e.context().op, "allreduce");
    EXPECT_EQ(e.context().group, "default");
    EXPECT_EQ(e.context().rank, 0);
  }
}

using test::errorsOnThreadRanks;

TEST(GroupCreationTest, ARankThatSkipsANewGroupIsNamedByEveryRank) {
  // Rank 2 skips new_group([0, 1]); its next call, new_group([1, 2]), meets the others' first.
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> errors = errorsOnThreadRanks(3, 20s, [](ProcessGroup& group) {
    if (group.rank() != 2) group.newGroup({0, 1});
    group.newGroup({1, 2});
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "waited for the timeout";
  for (int rank : {0, 1}) {
    EXPECT_NE(errors[rank].find("new_group [0, 1] in group 'default' (group creation #1"),
              std::string::npos)
        << errors[rank];
    EXPECT_NE(errors[rank].find("rank 2 made new_group [1, 2] as its group creation #1"),
              std::string::npos)
        << errors[rank];
  }
  EXPECT_NE(errors[2].find("rank 0 made new_group [0, 1]"), std::string::npos) << errors[2];
}

TEST(GroupCreationTest, SubgroupsOfSubgroupsKeepTheirOwnCount) {
  std::vector<std::string> errors = errorsOnThreadRanks(3, 20s, [](ProcessGroup& group) {
    std::shared_ptr<ProcessGroup> pair = group.newGroup({0, 1});
    if (pair->isMember()) {
      std::shared_ptr<ProcessGroup> single = pair->newGroup({1});  // its own creation #1
      if (single->isMember() != (group.rank() == 1)) throw std::runtime_error("wrong membership");
    }
    group.newGroup({2});  // the world's creation #2
  });
  EXPECT_EQ(errors, std::vector<std::string>(3, "")) << errors[0] << errors[1] << errors[2];
}

TEST(GroupCreationTest, ARankThatMakesNoGroupIsNamedAtTheTimeout) {
  std::vector<std::string> errors = errorsOnThreadRanks(3, 1s, [](ProcessGroup& group) {
    if (group.rank() != 1) group.split(0, group.rank());
  });
  for (int rank : {0, 2}) {
    EXPECT_NE(errors[rank].find("split in group 'default' (group creation #1 on this rank): "
                                "rank(s) [1] made no group creation #1 within 1000 ms"),
              std::string::npos)
        << errors[rank];
  }
  EXPECT_EQ(errors[1], "");
}

// One thread issues collectives while another shuts the group down: each op either completes
// or fails with a StateError, whether it was issued after the shutdown or was in flight at it.
// The backend used to drop its op queue under the issuing thread.
TEST(ProcessGroupTest, ShutdownWhileAnotherThreadIssuesOpsFailsThemCleanly) {
  for (int round = 0; round < 30; ++round) {
    ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, ProcessGroupOptions{.timeout = 10s});
    std::atomic<bool> started{false};
    std::string stoppedBy;
    std::thread issuer([&] {
      Tensor t = Tensor::zeros({256}, ScalarType::Float32);
      try {
        for (;;) {
          pg.allreduce(t)->wait();
          started = true;
        }
      } catch (const StateError& e) {
        stoppedBy = e.what();
      } catch (const Error& e) {
        stoppedBy = std::string("not a StateError: ") + e.what();
      }
    });
    while (!started) std::this_thread::yield();
    pg.shutdown();
    issuer.join();
    EXPECT_NE(stoppedBy.find("shut down"), std::string::npos) << stoppedBy;
    EXPECT_EQ(stoppedBy.find("not a StateError"), std::string::npos) << stoppedBy;
  }
}

// A caller's Work has no producer side: only the backend that made a Work completes it.
template <typename W>
concept Completable = requires(W& work) {
  work.finish();
  work.finishWithError(std::exception_ptr());
  work.setSourceRank(0);
};
static_assert(!Completable<Work>, "a Work's caller must not be able to complete it");
static_assert(!std::is_constructible_v<Work, std::string, std::chrono::milliseconds>,
              "a program's backend makes a BackendWork, not a bare Work");
static_assert(Completable<BackendWork>, "a program's backend completes its BackendWork");

TEST(WorkTest, FutureThenAndErrors) {
  BackendWork work("test op", 1s, {});
  auto chained = work.getFuture()->then(
      [](Future&) { return std::vector<Tensor>{Tensor::zeros({2}, ScalarType::Float32)}; });
  EXPECT_FALSE(work.isCompleted());
  EXPECT_THROW(work.wait(20ms), TimeoutError);
  work.finish();
  EXPECT_TRUE(work.isSuccess());
  ASSERT_TRUE(chained->completed());
  EXPECT_EQ(chained->value().size(), 1u);
  EXPECT_THROW(work.sourceRank(), Error);

  BackendWork failing("failing op", 1s, {});
  bool callbackSawError = false;
  failing.getFuture()->addCallback([&](Future& f) { callbackSawError = f.hasError(); });
  failing.finishWithError(std::make_exception_ptr(BackendError("peer 3 vanished")));
  EXPECT_TRUE(callbackSawError);
  EXPECT_FALSE(failing.isSuccess());
  try {
    failing.wait();
    FAIL() << "error not rethrown";
  } catch (const BackendError& e) {
    EXPECT_STREQ(e.what(), "peer 3 vanished");
  }
}

TEST(WorkTest, ACallbackThrowingANonStdExceptionDoesNotSkipTheOthers) {
  BackendWork work("op", 1s, {});
  bool laterRan = false;
  work.getFuture()->addCallback([](Future&) { throw 42; });
  work.getFuture()->addCallback([&](Future&) { laterRan = true; });
  work.finish();  // used to let the int escape and skip the second callback
  EXPECT_TRUE(laterRan);
  EXPECT_TRUE(work.isSuccess());
}

TEST(WorldDetectionTest, ReadsEachLauncherConvention) {
  {
    ScopedEnv env({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}});
    WorldInfo info = detectWorld({});
    EXPECT_EQ(info.rank, 3);
    EXPECT_EQ(info.worldSize, 8);
    EXPECT_EQ(info.localRank, 1);
  }
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "2"},
                   {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
    WorldInfo info = detectWorld({});
    EXPECT_EQ(info.rank, 2);
    EXPECT_EQ(info.source, "Open MPI");
  }
  {
    ScopedEnv env({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
    EXPECT_EQ(detectWorld({}).source, "PMI");
  }
  {
    ScopedEnv env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "1"}});
    WorldInfo info = detectWorld({});
    EXPECT_EQ(info.rank, 5);
    EXPECT_EQ(info.localRank, 1);
  }
}

TEST(WorldDetectionTest, MissingOrBadVariablesNameThemselves) {
  {
    ScopedEnv env({});
    try {
      detectWorld({});
      FAIL();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("RANK and WORLD_SIZE"), std::string::npos);
    }
  }
  {
    ScopedEnv env({{"RANK", "0"}});
    try {
      detectWorld({});
      FAIL();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("WORLD_SIZE is not"), std::string::npos) << e.what();
    }
  }
  {
    ScopedEnv env({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
    EXPECT_THROW(detectWorld({}), InvalidArgument);
  }
  {
    ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
    try {
      initProcessGroup();
      FAIL();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("MASTER_ADDR"), std::string::npos) << e.what();
    }
  }
  {
    ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
    EXPECT_THROW(initProcessGroup({.initMethod = "udp://x"}), InvalidArgument);
    EXPECT_THROW(initProcessGroup({.initMethod = "tcp://nohostport"}), InvalidArgument);
  }
}

void expectWorkingGroupOfOne(const std::shared_ptr<ProcessGroup>& pg) {
  ASSERT_EQ(pg->size(), 1);
  Tensor t = Tensor::empty({2}, ScalarType::Float64);
  t.data<double>()[0] = 1.5;
  t.data<double>()[1] = -2.0;
  pg->allreduce(t, {.reduceOp = ReduceOp::MAX})->wait();
  EXPECT_EQ(t.data<double>()[0], 1.5);
  EXPECT_EQ(t.data<double>()[1], -2.0);
}

TEST(InitTest, EnvTcpAndFileMethodsBuildAWorkingGroup) {
  {
    std::string port = std::to_string(test::freeLoopbackPort());
    ScopedEnv env({{"RANK", "0"},
                   {"WORLD_SIZE", "1"},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", port.c_str()},
                   {"C10D_TIMEOUT", "20"}});
    auto pg = initProcessGroup();
    EXPECT_EQ(pg->timeout(), 20s);
    expectWorkingGroupOfOne(pg);
  }
  {
    ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
    expectWorkingGroupOfOne(initProcessGroup(
        {.initMethod = "tcp://127.0.0.1:" + std::to_string(test::freeLoopbackPort()),
         .timeout = 20s}));
  }
  {
    ScopedEnv env({});
    std::string path =
        (std::filesystem::temp_directory_path() / ("c10d_init_test_" + std::to_string(getpid())))
            .string();
    expectWorkingGroupOfOne(initProcessGroup(
        {.initMethod = "file://" + path, .rank = 0, .worldSize = 1, .timeout = 20s}));
    std::filesystem::remove(path);
  }
  {
    ScopedEnv env(
        {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "0"}});
    EXPECT_THROW(initProcessGroup(), InvalidArgument);  // ranks could not agree on port 0
  }
}

// Each op's calls and size as nccl-tests counts it: the buffer, or all N parts of a gathered or
// scattered one; invalid calls are not counted; resetTraffic starts again.
TEST(ProcessGroupTest, TrafficCountsCallsAndBytesPerOp) {
  constexpr int kSize = 3;
  auto errors = errorsOnThreadRanks(kSize, std::chrono::seconds(30), [](ProcessGroup& pg) {
    auto t = Tensor::zeros({256}, ScalarType::Float32);  // 1 KiB
    for (int i = 0; i < 3; ++i) pg.allreduce(t)->wait();
    auto part = Tensor::zeros({16}, ScalarType::Float32);  // 64 B
    auto all = Tensor::zeros({16 * kSize}, ScalarType::Float32);
    pg.allgatherIntoTensor(all, part)->wait();
    pg.reduceScatterTensor(part, all)->wait();
    if (pg.rank() == 0) pg.send(part, 1, SendOptions{.tag = 5})->wait();
    if (pg.rank() == 1) pg.recv(part, 0, RecvOptions{.tag = 5})->wait();
    EXPECT_THROW(pg.broadcast(t, BroadcastOptions{.rootRank = kSize}), InvalidArgument);
    std::map<std::string, OpTraffic> counted;
    for (const OpTraffic& count : pg.traffic()) counted[count.op] = count;
    EXPECT_EQ(counted["allreduce"].calls, 3u);
    EXPECT_EQ(counted["allreduce"].bytes, 3u * 1024);
    EXPECT_EQ(counted["allgather_into_tensor"].bytes, 64u * kSize);
    EXPECT_EQ(counted["reduce_scatter_tensor"].bytes, 64u * kSize);
    EXPECT_EQ(counted.count("broadcast"), 0u) << "a refused call is not traffic";
    const uint64_t sent = pg.rank() == 0 ? 64 : 0, received = pg.rank() == 1 ? 64 : 0;
    EXPECT_EQ(counted["send"].bytes, sent);
    EXPECT_EQ(counted["recv"].bytes, received);
    pg.resetTraffic();
    EXPECT_TRUE(pg.traffic().empty());
  });
  for (int rank = 0; rank < kSize; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

}  // namespace
}  // namespace c10d::inline v1
