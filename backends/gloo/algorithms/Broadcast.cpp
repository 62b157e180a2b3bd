// Broadcast: a binomial tree, van de Geijn's scatter-allgather, and a pipelined chain.

#include "backends/gloo/algorithms/MeshAlgorithms.hpp"

namespace c10d::inline v1 {

void MeshAlgorithms::broadcast(void* data, size_t bytes, int root) {
  if (!hierarchical_) {
    broadcastIn(all_, data, bytes, root);
    return;
  }
  const Team reps = representatives(root);
  if (reps.me >= 0) broadcastIn(reps, data, bytes, hostOfRank_[root]);
  if (host_.size() > 1) broadcastIn(host_, data, bytes, indexOnHost(reps[hostOfRank_[rank_]]));
}

bool MeshAlgorithms::broadcastsPastOneMessage(size_t bytes) const {
  const Team& across = hierarchical_ ? leaders_ : all_;
  return forced_.broadcast ||
         choose(forced_.broadcast, across, bytes, cost::BroadcastAlgorithm::Binomial) !=
             cost::BroadcastAlgorithm::Binomial;
}

void MeshAlgorithms::broadcastIn(const Team& team, void* data, size_t bytes, int rootIndex) {
  if (team.size() < 2) return;
  auto* base = static_cast<uint8_t*>(data);
  switch (choose(forced_.broadcast, team, bytes, cost::BroadcastAlgorithm::Binomial)) {
    case cost::BroadcastAlgorithm::Binomial:
      binomialBroadcast(team, base, bytes, rootIndex);
      return;
    case cost::BroadcastAlgorithm::ScatterAllgather:
      scatterAllgatherBroadcast(team, base, bytes, rootIndex);
      return;
    case cost::BroadcastAlgorithm::Pipeline:
      pipelineBroadcast(team, base, bytes, rootIndex);
      return;
  }
}

// Binomial tree from the root, piece by piece (each member forwards a piece as soon as it has it).
void MeshAlgorithms::binomialBroadcast(const Team& team, uint8_t* data, size_t bytes,
                                       int rootIndex) {
  const int n = team.size();
  const int relative = (team.me - rootIndex + n) % n;
  int parentMask = 1;
  while (parentMask < n && !(relative & parentMask)) parentMask *= 2;
  inPieces(bytes, kMaxMessageBytes, [&](size_t offset, size_t length) {
    uint8_t* piece = data + offset;
    if (parentMask < n) recv(team[relative - parentMask + rootIndex], piece, length);
    for (int mask = parentMask / 2; mask > 0; mask /= 2) {
      if (relative + mask < n) send(team[relative + mask + rootIndex], piece, length);
    }
  });
}

// van de Geijn: the buffer cut in one segment per member (by index relative to the root), each
// member's subtree's segments down a binomial tree, then a ring allgather of the segments. Each
// member sends about 2(p-1)/p of the buffer where the root of a binomial tree sends log2(p) times
// all of it.
void MeshAlgorithms::scatterAllgatherBroadcast(const Team& team, uint8_t* data, size_t bytes,
                                               int rootIndex) {
  const int n = team.size();
  const int relative = (team.me - rootIndex + n) % n;
  const size_t segment = (bytes + n - 1) / n;
  auto at = [&](int index) { return std::min(static_cast<size_t>(index) * segment, bytes); };
  int parentMask = 1;
  while (parentMask < n && !(relative & parentMask)) parentMask *= 2;
  if (parentMask < n) {
    exchangeRanges(team[relative - parentMask + rootIndex], data, 0, 0, at(relative),
                   at(std::min(relative + parentMask, n)), 1, nullptr);
  }
  for (int mask = parentMask / 2; mask > 0; mask /= 2) {
    const int child = relative + mask;
    if (child < n) {
      exchangeRanges(team[child + rootIndex], data, at(child), at(std::min(child + mask, n)), 0, 0,
                     1, nullptr);
    }
  }
  // Member m owns segment m - rootIndex.
  ringPhase(team, data, bytes, segment, 1, -rootIndex, nullptr);
}

// A chain from the root in member order, in pieces sized for the link (cost::pipelinePiece):
// each member passes a piece on as soon as it has it, so the buffer crosses each link once.
void MeshAlgorithms::pipelineBroadcast(const Team& team, uint8_t* data, size_t bytes,
                                       int rootIndex) {
  const int n = team.size();
  const int relative = (team.me - rootIndex + n) % n;
  inPieces(bytes, cost::pipelinePiece(n, bytes, link_, kMaxMessageBytes),
           [&](size_t offset, size_t length) {
             if (relative > 0) recv(team[team.me - 1], data + offset, length);
             if (relative < n - 1) send(team[team.me + 1], data + offset, length);
           });
}

}  // namespace c10d::inline v1
