#pragma once

// Private to backends/gloo. The collective algorithms of the small-message path, over the
// blocking messages of a SyncMesh (transport/SyncMesh.hpp): which ranks take part (teams, hosts),
// which algorithm of a kind runs (CostModel.hpp), and the algorithms themselves, one file per
// family: Allreduce.cpp, ReduceScatter.cpp, Reduce.cpp, Broadcast.cpp, Allgather.cpp,
// Alltoall.cpp, Barrier.cpp; Exchange.cpp holds the pieces they share (a ring's phase, a paired
// exchange of ranges). A new algorithm is a member here, in its family's file, and, where cost
// chooses it, a row of CostModel.hpp.
//
// Not thread-safe: one op at a time, on the thread that runs the group's collectives, after the
// mesh's call is set (SyncMesh::setCall). Every rank of the group calls the same collective with
// the same sizes; each member's messages then match its peers' (a mismatch throws WireMismatch).

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "backends/common/Reduce.hpp"
#include "backends/gloo/algorithms/CostModel.hpp"
#include "backends/gloo/transport/SyncMesh.hpp"

namespace c10d::inline v1 {

class MeshAlgorithms {
 public:
  explicit MeshAlgorithms(SyncMesh& mesh);
  MeshAlgorithms(const MeshAlgorithms&) = delete;
  MeshAlgorithms& operator=(const MeshAlgorithms&) = delete;

  SyncMesh& mesh() const { return mesh_; }

  // C10D_GLOO_HIERARCHICAL. Values are what ranks tell each other.
  enum class Hierarchy { Off = 0, On = 1, Auto = 2 };
  // What the ranks agree on: Off when any says so, On when all do, else Auto.
  static Hierarchy agreedHierarchy(Hierarchy a, Hierarchy b) {
    if (a == Hierarchy::Off || b == Hierarchy::Off) return Hierarchy::Off;
    return a == Hierarchy::On && b == Hierarchy::On ? Hierarchy::On : Hierarchy::Auto;
  }
  // The host of every rank (numbered in the order of their lowest rank; the same on every rank).
  // When ranks are on several hosts, some sharing one, allreduce, broadcast, reduce, allgather
  // and reduce_scatter can be hierarchical: within each host (over shared memory where it is on),
  // then among one rank per host, then within each host again. On: always; Auto: when its messages
  // cross hosts fewer times in turn than the flat algorithm's (crossings, below). Returns what it
  // chose, for the log ("" for a group on one host).
  std::string setHosts(const std::vector<int>& hostOfRank, Hierarchy hierarchy);
  // How many times in turn recursive doubling over members (ranks, in this order) crosses
  // hosts: the rounds (and the fold and unfold) in which some pair of members is on two hosts.
  // Small messages cost little over shared memory and a network hop each across hosts, so this
  // is their latency.
  static int crossings(const std::vector<int>& hostOfRank, const std::vector<int>& members);

  // The link that prices messages over TCP (the same on every rank).
  void setLink(const cost::LinkCost& link) { link_ = link; }
  // The algorithms every size takes where the user chose one (C10D_ALLREDUCE_ALGO,
  // C10D_BROADCAST_ALGO, C10D_ALLGATHER_ALGO; the same on every rank); nullopt: by cost.
  struct Forced {
    std::optional<cost::AllreduceAlgorithm> allreduce;
    std::optional<cost::BroadcastAlgorithm> broadcast;
    std::optional<cost::AllgatherAlgorithm> allgather;
  };
  void force(const Forced& forced) { forced_ = forced; }

  // Collectives over whole buffers of any size; larger ones travel in kMaxMessageBytes pieces.
  // Over TCP, allreduce, broadcast and allgather take the cheapest algorithm of their kind for
  // the link (CostModel.hpp); on shared memory, where a message costs little more than its copy,
  // allreduce takes recursive doubling up to kMaxMessageBytes (fewest steps) and a ring beyond
  // (fewest bytes per rank), broadcast a binomial tree, allgather a ring. Hierarchical across
  // hosts after setHosts.
  void allreduce(void* data, size_t count, size_t elementSize, ReduceFunction reduce);
  // data holds size() blocks of blockCount elements; afterwards block rank() is the reduction.
  void reduceScatter(void* data, size_t blockCount, size_t elementSize, ReduceFunction reduce);
  void reduce(void* data, size_t count, size_t elementSize, ReduceFunction reduce, int root);
  void broadcast(void* data, size_t bytes, int root);
  // Whether a broadcast of bytes crosses hosts with more than a binomial tree (a pipeline or a
  // scatter-allgather, by cost or forced): past one message, only those beat gloo::broadcast.
  bool broadcastsPastOneMessage(size_t bytes) const;
  // output holds size() blocks of bytes; block rank() must already hold our input.
  void allgather(void* output, size_t bytes);
  // Block r of input goes to rank r; block r of output comes from rank r.
  void alltoall(const void* input, void* output, size_t blockBytes);
  void barrier();

 private:
  static constexpr size_t kMaxMessageBytes = SyncMesh::kMaxMessageBytes;

  // The ranks an algorithm runs over, in an order every member agrees on, and this rank's
  // index among them (-1: not a member).
  struct Team {
    std::vector<int> ranks;
    int me = -1;
    int size() const { return static_cast<int>(ranks.size()); }
    int operator[](int index) const { return ranks[(index % size() + size()) % size()]; }
  };
  Team teamOf(std::vector<int> ranks) const;
  // One rank per host: root on its host, the lowest rank on the others.
  Team representatives(int root) const;
  // The index of rank `rep` among the ranks of this rank's host.
  int indexOnHost(int rep) const;

  // The forced algorithm, else over TCP (a team that is not this host's) the cheapest for the
  // link, else the one for shared memory.
  template <typename Algorithm>
  Algorithm choose(const std::optional<Algorithm>& forced, const Team& team, size_t bytes,
                   Algorithm onSharedMemory) const;

  // Allreduce.cpp
  void allreduceIn(const Team& team, void* data, size_t count, size_t elementSize,
                   ReduceFunction reduce);
  void recursiveDoublingAllreduce(const Team& team, void* data, size_t count, size_t elementSize,
                                  ReduceFunction reduce);
  void ringAllreduce(const Team& team, void* data, size_t count, size_t elementSize,
                     ReduceFunction reduce);
  void halvingDoublingAllreduce(const Team& team, void* data, size_t count, size_t elementSize,
                                ReduceFunction reduce);
  // Reduce.cpp
  void reduceIn(const Team& team, void* data, size_t count, size_t elementSize,
                ReduceFunction reduce, int rootIndex);
  // Broadcast.cpp
  void broadcastIn(const Team& team, void* data, size_t bytes, int rootIndex);
  void binomialBroadcast(const Team& team, uint8_t* data, size_t bytes, int rootIndex);
  void scatterAllgatherBroadcast(const Team& team, uint8_t* data, size_t bytes, int rootIndex);
  void pipelineBroadcast(const Team& team, uint8_t* data, size_t bytes, int rootIndex);
  // Allgather.cpp
  void bruckAllgather(uint8_t* base, size_t bytes);
  // Exchange.cpp
  void ringPhase(const Team& team, uint8_t* base, size_t count, size_t segment, size_t elementSize,
                 int shift, ReduceFunction reduce);
  void exchangeRanges(int peer, uint8_t* base, size_t sendBegin, size_t sendEnd, size_t recvBegin,
                      size_t recvEnd, size_t elementSize, ReduceFunction reduce);
  void sendRecvPieces(int to, const uint8_t* out, size_t sendCount, int from, uint8_t* in,
                      size_t recvCount, size_t elementSize, ReduceFunction reduce);
  // The middle step of hierarchical allgather (reduce null) and reduce_scatter, on each host's
  // lowest rank: base holds size() blocks of blockBytes.
  void exchangeAmongLeaders(uint8_t* base, size_t blockBytes, size_t elementSize,
                            ReduceFunction reduce);
  // The largest message of whole elements.
  static size_t pieceBytes(size_t elementSize) {
    return kMaxMessageBytes / elementSize * elementSize;
  }
  // Calls fn(offset, length) for consecutive pieces of at most piece units covering total.
  template <typename Fn>
  static void inPieces(size_t total, size_t piece, Fn&& fn) {
    for (size_t offset = 0; offset < total; offset += piece)
      fn(offset, std::min(piece, total - offset));
  }

  void send(int peer, const void* data, size_t bytes) { mesh_.send(peer, data, bytes); }
  void recv(int peer, void* data, size_t bytes) { mesh_.recv(peer, data, bytes); }
  void recvReduce(int peer, void* target, size_t count, size_t elementSize, ReduceFunction reduce,
                  bool incomingFirst) {
    mesh_.recvReduce(peer, target, count, elementSize, reduce, incomingFirst);
  }

  SyncMesh& mesh_;
  const int rank_;
  const int size_;
  cost::LinkCost link_;
  Forced forced_;
  Team all_;      // every rank
  Team host_;     // the ranks of this rank's host
  Team leaders_;  // the lowest rank of each host: the layered ops' middle step
  std::vector<int> hostOfRank_;
  std::vector<std::vector<int>> ranksOfHost_;  // in rank order
  int hosts_ = 1;
  bool hierarchical_ = false;
};

template <typename Algorithm>
Algorithm MeshAlgorithms::choose(const std::optional<Algorithm>& forced, const Team& team,
                                 size_t bytes, Algorithm onSharedMemory) const {
  if (forced) return *forced;
  // Over sockets (a team of the whole group, or of the hosts' leaders, with some pair on TCP),
  // the cost model over the group's link; on shared memory, by size (measured,
  // docs/performance.md "Same-host shared memory").
  if (!mesh_.allShared() && &team != &host_) {
    return cost::cheapest<Algorithm>(team.size(), bytes, link_, kMaxMessageBytes);
  }
  return onSharedMemory;
}

}  // namespace c10d::inline v1
