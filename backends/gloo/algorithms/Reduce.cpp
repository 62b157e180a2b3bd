// Reduce: a binomial tree toward the root; layered through each host's representative.

#include "backends/gloo/algorithms/MeshAlgorithms.hpp"

namespace c10d::inline v1 {

void MeshAlgorithms::reduce(void* data, size_t count, size_t elementSize, ReduceFunction reduceFn,
                            int root) {
  if (!hierarchical_) {
    reduceIn(all_, data, count, elementSize, reduceFn, root);
    return;
  }
  const Team reps = representatives(root);
  const int rep = reps[hostOfRank_[rank_]];
  if (host_.size() > 1) reduceIn(host_, data, count, elementSize, reduceFn, indexOnHost(rep));
  if (reps.me >= 0) reduceIn(reps, data, count, elementSize, reduceFn, hostOfRank_[root]);
}

// Binomial tree toward the root over members relative to it, piece by piece.
void MeshAlgorithms::reduceIn(const Team& team, void* data, size_t count, size_t elementSize,
                              ReduceFunction reduceFn, int rootIndex) {
  const int n = team.size();
  const int relative = (team.me - rootIndex + n) % n;
  inPieces(count, kMaxMessageBytes / elementSize, [&](size_t offset, size_t length) {
    uint8_t* piece = static_cast<uint8_t*>(data) + offset * elementSize;
    for (int mask = 1; mask < n; mask *= 2) {
      if (relative & mask) {
        send(team[relative - mask + rootIndex], piece, length * elementSize);
        return;
      }
      int child = relative + mask;
      if (child < n) {
        recvReduce(team[child + rootIndex], piece, length, elementSize, reduceFn, false);
      }
    }
  });
}

}  // namespace c10d::inline v1
