// The Gloo backend's small-message path (backends/gloo/algorithms/ over transport/SyncMesh)
// and its point-to-point matching (backends/gloo/p2p/) with ranks as threads of one process, so
// that ThreadSanitizer sees both ends (tsan_in_process): every algorithm at world sizes that are
// and are not powers of two, with element counts that do not divide evenly into the ranks' pieces,
// and sends and receives of every framing. The forked-rank conformance suite covers the same ops
// through ProcessGroup.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/gloo/algorithms/MeshAlgorithms.hpp"
#include "c10d/core/Exception.hpp"
#include "tests/support/BackendCalls.hpp"
#include "tests/support/ThreadRanks.hpp"

namespace c10d::inline v1 {
namespace {

using namespace std::chrono_literals;
constexpr std::chrono::milliseconds kTimeout = 30s;  // the group's: ops take the SyncMesh

class SyncMeshTest : public ::testing::TestWithParam<int> {
 protected:
  // Runs body(rank, backend) on GetParam() ranks, each a thread with its own Gloo backend.
  void onRanks(const std::function<void(int, test::BackendCalls&)>& body) {
    test::onGlooThreadRanks(GetParam(), kTimeout, "mesh",
                            [&](int rank, std::shared_ptr<Backend> gloo) {
                              test::BackendCalls calls(gloo, kTimeout);
                              body(rank, calls);
                            });
  }
};

Tensor ints(int64_t count, const std::function<int32_t(int64_t)>& value) {
  Tensor t = Tensor::empty({count}, ScalarType::Int32);
  for (int64_t i = 0; i < count; ++i) t.data<int32_t>()[i] = value(i);
  return t;
}

// Counts around the pieces: fewer elements than ranks, uneven splits, and a few KiB.
const int64_t kCounts[] = {1, 3, 7, 1000, 4099};

TEST_P(SyncMeshTest, AllreduceSumsEveryRanksValues) {
  onRanks([](int rank, test::BackendCalls& gloo) {
    const int size = gloo.size();
    for (int64_t n : kCounts) {
      Tensor t = ints(n, [&](int64_t i) { return static_cast<int32_t>(rank * 1000 + i); });
      gloo.allreduce(t, {.reduceOp = ReduceOp::SUM, .timeout = kTimeout})->wait();
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(t.data<int32_t>()[i], 1000 * size * (size - 1) / 2 + size * i)
            << "n " << n << " element " << i;
      }
    }
  });
}

TEST_P(SyncMeshTest, BroadcastFromEveryRoot) {
  onRanks([](int rank, test::BackendCalls& gloo) {
    for (int root = 0; root < gloo.size(); ++root) {
      for (int64_t n : kCounts) {
        Tensor t = ints(
            n, [&](int64_t i) { return rank == root ? static_cast<int32_t>(i + 7 * root) : -1; });
        gloo.broadcast(t, {.rootRank = root, .timeout = kTimeout})->wait();
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(t.data<int32_t>()[i], i + 7 * root);
      }
    }
  });
}

TEST_P(SyncMeshTest, AllgatherAndReduceScatterAreEachOthersShape) {
  onRanks([](int rank, test::BackendCalls& gloo) {
    const int size = gloo.size();
    for (int64_t n : kCounts) {
      Tensor mine = ints(n, [&](int64_t i) { return static_cast<int32_t>(rank * 100000 + i); });
      Tensor all = Tensor::zeros({n * size}, ScalarType::Int32);
      gloo.allgatherIntoTensor(all, mine, {.timeout = kTimeout})->wait();
      for (int r = 0; r < size; ++r) {
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(all.data<int32_t>()[r * n + i], r * 100000 + i);
      }
      Tensor piece = Tensor::zeros({n}, ScalarType::Int32);
      Tensor input = ints(n * size, [&](int64_t i) { return static_cast<int32_t>(i + rank); });
      gloo.reduceScatterTensor(piece, input, {.reduceOp = ReduceOp::SUM, .timeout = kTimeout})
          ->wait();
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(piece.data<int32_t>()[i], size * (rank * n + i) + size * (size - 1) / 2);
      }
    }
  });
}

TEST_P(SyncMeshTest, AlltoallSendsEachRankItsRow) {
  onRanks([](int rank, test::BackendCalls& gloo) {
    const int size = gloo.size();
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{300}}) {
      Tensor in = ints(n * size, [&](int64_t i) { return static_cast<int32_t>(rank * 10000 + i); });
      Tensor out = Tensor::zeros({n * size}, ScalarType::Int32);
      gloo.alltoallBase(out, in, {}, {}, {.timeout = kTimeout})->wait();
      for (int r = 0; r < size; ++r) {
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(out.data<int32_t>()[r * n + i], r * 10000 + rank * n + i);
        }
      }
    }
  });
}

TEST_P(SyncMeshTest, ReduceAndBarrier) {
  onRanks([](int rank, test::BackendCalls& gloo) {
    const int size = gloo.size();
    for (int root = 0; root < size; ++root) {
      Tensor t = ints(13, [&](int64_t i) { return static_cast<int32_t>(rank + i); });
      gloo.reduce(t, {.reduceOp = ReduceOp::MAX, .rootRank = root, .timeout = kTimeout})->wait();
      if (rank == root) {
        for (int64_t i = 0; i < 13; ++i) ASSERT_EQ(t.data<int32_t>()[i], size - 1 + i);
      }
      gloo.barrier({.timeout = kTimeout})->wait();
    }
  });
}

TEST_P(SyncMeshTest, PointToPointRingsOfEveryFramingAndAMismatch) {
  onRanks([](int rank, test::BackendCalls& gloo) {
    const int size = gloo.size();
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    // In the head, at the head's limit, and with a bulk; any-source and posted after the send.
    for (int64_t n : {int64_t{1}, int64_t{65536}, int64_t{100000}}) {
      Tensor out = ints(n, [&](int64_t i) { return static_cast<int32_t>(rank * 7 + i); });
      Tensor in = Tensor::zeros({n}, ScalarType::Int32);
      auto send = gloo.send(out, right, 3, kTimeout);
      auto recv = n == 1 ? gloo.recvAnysource(in, 3, kTimeout) : gloo.recv(in, left, 3, kTimeout);
      recv->wait();
      send->wait();
      ASSERT_EQ(recv->sourceRank(), left);
      for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(in.data<int32_t>()[i], left * 7 + i);
    }
    // Rank 0 sends 8 elements to rank 1, which takes 4: both fail, and the pair goes on.
    if (rank < 2) {
      Tensor t = Tensor::zeros({rank == 0 ? 8 : 4}, ScalarType::Int32);
      auto work = rank == 0 ? gloo.send(t, 1, 9, kTimeout) : gloo.recv(t, 0, 9, kTimeout);
      EXPECT_THROW(work->wait(), InvalidArgument);
      auto again = rank == 0 ? gloo.send(Tensor::zeros({4}, ScalarType::Int32), 1, 9, kTimeout)
                             : gloo.recv(t, 0, 9, kTimeout);
      again->wait();
    }
  });
}

// Hosts as the group sees them (C10D_HOST_ID per thread rank: shared memory within a "host",
// TCP between them), with C10D_GLOO_HIERARCHICAL=1 and C10D_GLOO_FAST_PATH=all (every size on
// the SyncMesh): every layered op over uneven, interleaved
// and lopsided layouts, with blocks small, odd and larger than one message, and roots that are
// not their host's lowest rank. Every element is checked.
class SyncMeshHostsTest : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(SyncMeshHostsTest, EveryLayeredOpIsExact) {
  const std::vector<int> hostOf = GetParam();
  const int size = static_cast<int>(hostOf.size());
  test::onGlooThreadRanks(
      size, kTimeout, "hosts",
      [&](int rank, std::shared_ptr<Backend> backend) {
        test::BackendCalls calls(backend, kTimeout);
        test::BackendCalls* gloo = &calls;
        for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{70001}}) {  // 70001: 280 KB, 2 messages
          Tensor mine = ints(n, [&](int64_t i) { return static_cast<int32_t>(rank * 100000 + i); });
          Tensor all = Tensor::zeros({n * size}, ScalarType::Int32);
          gloo->allgatherIntoTensor(all, mine, {.timeout = kTimeout})->wait();
          for (int r = 0; r < size; ++r) {
            for (int64_t i = 0; i < n; ++i) {
              ASSERT_EQ(all.data<int32_t>()[r * n + i], r * 100000 + i)
                  << "allgather n " << n << " block " << r << " element " << i;
            }
          }
          Tensor piece = Tensor::zeros({n}, ScalarType::Int32);
          Tensor input = ints(n * size, [&](int64_t i) { return static_cast<int32_t>(i + rank); });
          gloo->reduceScatterTensor(piece, input, {.reduceOp = ReduceOp::SUM, .timeout = kTimeout})
              ->wait();
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(piece.data<int32_t>()[i], size * (rank * n + i) + size * (size - 1) / 2)
                << "reduce_scatter n " << n << " element " << i;
          }
          Tensor summed = ints(n, [&](int64_t i) { return static_cast<int32_t>(rank + i); });
          gloo->allreduce(summed, {.reduceOp = ReduceOp::SUM, .timeout = kTimeout})->wait();
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(summed.data<int32_t>()[i], size * (size - 1) / 2 + size * i) << "allreduce";
          }
          const int root = size - 1;  // not the lowest rank of its host in these layouts
          Tensor sent =
              ints(n, [&](int64_t i) { return rank == root ? static_cast<int32_t>(i) : -1; });
          gloo->broadcast(sent, {.rootRank = root, .timeout = kTimeout})->wait();
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sent.data<int32_t>()[i], i) << "broadcast";
          Tensor most = ints(n, [&](int64_t i) { return static_cast<int32_t>(rank * 3 + i); });
          gloo->reduce(most, {.reduceOp = ReduceOp::MAX, .rootRank = root, .timeout = kTimeout})
              ->wait();
          if (rank == root) {
            for (int64_t i = 0; i < n; ++i) {
              ASSERT_EQ(most.data<int32_t>()[i], (size - 1) * 3 + i) << "reduce";
            }
          }
        }
      },
      [&](int rank) {
        return std::map<std::string, std::string>{
            {"C10D_HOST_ID", "host" + std::to_string(hostOf[rank])},
            {"C10D_GLOO_HIERARCHICAL", "1"},
            {"C10D_GLOO_BUSY_POLL", "0"},
            {"C10D_GLOO_FAST_PATH", "all"}};  // large ops too, though ranks sleep in reads
      });
}

INSTANTIATE_TEST_SUITE_P(Layouts, SyncMeshHostsTest,
                         ::testing::Values(std::vector<int>{0, 0, 1, 2, 2},     // uneven
                                           std::vector<int>{0, 1, 0, 1, 0, 1},  // interleaved
                                           std::vector<int>{0, 1, 1, 1},        // lopsided
                                           std::vector<int>{0, 1, 2, 0, 2, 0, 1}),
                         [](const ::testing::TestParamInfo<std::vector<int>>& info) {
                           std::string name = "H";
                           for (int h : info.param) name += std::to_string(h);
                           return name;
                         });

// The hierarchical path's automatic choice: it must cross hosts fewer times in turn than flat
// recursive doubling. Hosts in rank order make flat doubling cross as rarely (its first rounds
// stay within a host); hosts dealt round-robin make it cross in every round.
TEST(SyncMeshLayout, CrossingsCountTheRoundsThatLeaveAHost) {
  const std::vector<int> contiguous3x2 = {0, 0, 1, 1, 2, 2};
  EXPECT_EQ(MeshAlgorithms::crossings(contiguous3x2, {0, 1, 2, 3, 4, 5}),
            3);                                                       // fold, round 2, unfold
  EXPECT_EQ(MeshAlgorithms::crossings(contiguous3x2, {0, 2, 4}), 3);  // one rank per host
  const std::vector<int> roundRobin3x2 = {0, 1, 2, 0, 1, 2};
  EXPECT_EQ(MeshAlgorithms::crossings(roundRobin3x2, {0, 1, 2, 3, 4, 5}),
            4);  // every round crosses
  EXPECT_EQ(MeshAlgorithms::crossings(roundRobin3x2, {0, 1, 2}), 3);
  const std::vector<int> contiguous2x4 = {0, 0, 0, 0, 1, 1, 1, 1};
  EXPECT_EQ(MeshAlgorithms::crossings(contiguous2x4, {0, 1, 2, 3, 4, 5, 6, 7}), 1);
  EXPECT_EQ(MeshAlgorithms::crossings(contiguous2x4, {0, 4}), 1);
  const std::vector<int> oneHost = {0, 0, 0};
  EXPECT_EQ(MeshAlgorithms::crossings(oneHost, {0, 1, 2}), 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, SyncMeshTest, ::testing::Values(2, 3, 4, 5),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "W" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace c10d::inline v1
