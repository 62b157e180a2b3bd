// Non-blocking point-to-point. First a ring: every rank starts a receive from its left neighbour
// and a send to its right neighbour, and only then waits for both, so no rank blocks while its
// neighbour is still waiting on it. Then rank 0 receives one message from each other rank with
// recvAnysource, in whatever order they arrive, and checks that Work::sourceRank() names the
// rank whose number is in the message. Run it with `c10drun --nproc-per-node 4 p2p_isend_irecv`.
//
// Exits 0 only when every check below passed on this rank.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ExampleUtils.hpp"

namespace {

constexpr int64_t kRingCount = 256;
constexpr int kRingTag = 1;
constexpr int kAnySourceTag = 7;

// What rank `sender` puts on the ring: distinct per sender, so a message from the wrong
// neighbour shows up as a mismatch.
float ringValue(int sender, int64_t i) {
  return static_cast<float>(sender * 1000 + i);
}

void run(c10d::ProcessGroup& pg, examples::Checker& checks) {
  const int rank = pg.rank();
  const int size = pg.size();
  if (size == 1) {
    // Like torch.distributed, a rank does not send to itself: with no peers there is no ring.
    std::printf("rank 0: world of 1, no peers: ring and any-source receive skipped\n");
    return;
  }

  const int right = (rank + 1) % size;
  const int left = (rank - 1 + size) % size;
  c10d::Tensor outgoing = examples::empty({kRingCount}, c10d::ScalarType::Float32);
  c10d::Tensor incoming = examples::zeros<float>({kRingCount}, c10d::ScalarType::Float32);
  examples::fill<float>(outgoing, [&](int64_t i) { return ringValue(rank, i); });
  // The receive is posted first so the message has a buffer to land in when it arrives.
  std::shared_ptr<c10d::Work> recvWork = pg.recv(incoming, left, kRingTag);
  std::shared_ptr<c10d::Work> sendWork = pg.send(outgoing, right, kRingTag);
  sendWork->wait();
  recvWork->wait();
  bool ringOk = checks.expectValues<float>(
      incoming, [&](int64_t i) { return ringValue(left, i); },
      "ring message from rank " + std::to_string(left));

  std::vector<int> anySourceSeen;
  bool anySourceOk = true;
  // NCCL matches messages by peer only: it has no any-source receive.
  if (pg.backend(examples::exampleDevice().type)->name() == "nccl") {
    std::printf(
        "rank %d: ring message from rank %d %s; any-source receive skipped (nccl has none)\n", rank,
        left, ringOk ? "correct" : "WRONG");
    return;
  }
  if (rank == 0) {
    // All receives are outstanding at once; each matches whichever sender comes next.
    std::vector<c10d::Tensor> slots;
    std::vector<std::shared_ptr<c10d::Work>> works;
    for (int i = 1; i < size; ++i) {
      slots.push_back(examples::empty({1}, c10d::ScalarType::Int32));
      examples::fill<int32_t>(slots.back(), [](int64_t) { return -1; });
      works.push_back(pg.recvAnysource(slots.back(), kAnySourceTag));
    }
    std::set<int> sources;
    for (size_t i = 0; i < works.size(); ++i) {
      works[i]->wait();
      int source = works[i]->sourceRank();
      int32_t payload = examples::valueAt<int32_t>(slots[i], 0);
      anySourceOk &=
          checks.expect(source == payload, "any-source receive ", i, ": sourceRank() is ", source,
                        " but the message carries rank ", payload);
      sources.insert(source);
      anySourceSeen.push_back(source);
    }
    anySourceOk &= checks.expect(
        sources.size() == works.size() && *sources.begin() == 1 && *sources.rbegin() == size - 1,
        "any-source receives came from ", sources.size(), " distinct ranks, expected each of 1..",
        size - 1, " once");
  } else {
    c10d::Tensor mine = examples::empty({1}, c10d::ScalarType::Int32);
    examples::fill<int32_t>(mine, [rank](int64_t) { return rank; });
    pg.send(mine, /*dstRank=*/0, kAnySourceTag)->wait();
  }

  if (rank == 0) {
    std::string order;
    for (int source : anySourceSeen) order += (order.empty() ? "" : " ") + std::to_string(source);
    std::printf("rank 0: ring message from rank %d %s; any-source receives from ranks [%s] %s\n",
                left, ringOk ? "correct" : "WRONG", order.c_str(),
                anySourceOk ? "each matching its payload" : "WRONG");
  } else {
    std::printf("rank %d: ring message from rank %d %s; sent my rank to rank 0 with tag %d\n", rank,
                left, ringOk ? "correct" : "WRONG", kAnySourceTag);
  }
}

}  // namespace

int main() {
  return examples::runExample("p2p_isend_irecv", run);
}
